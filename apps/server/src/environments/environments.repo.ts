// SQL for environments. Every method takes the tenant id first.
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import { prepared } from '../db/prepared.ts';
import type { EnvironmentInput } from './environments.schema.ts';

const COLUMNS = [
  'id',
  'name',
  'env_vars',
  'packages',
  'repos',
  'setup_script',
  'networking_type',
  'networking_config',
  'metadata',
  'checkpoint_id',
  'created_at',
  'updated_at',
] as const;

export type EnvironmentRow = NonNullable<Awaited<ReturnType<typeof findEnvironment>>>;

function jsonFields(input: EnvironmentInput) {
  return {
    name: input.name,
    env_vars: JSON.stringify(input.env_vars),
    packages: JSON.stringify(input.packages),
    repos: JSON.stringify(input.repos),
    setup_script: input.setup_script,
    networking_type: input.networking_type,
    networking_config: JSON.stringify(input.networking_config),
    metadata: JSON.stringify(input.metadata),
  };
}

export async function findEnvironment(db: Db, tenantId: string, id: string) {
  return await db
    .selectFrom('environments')
    .select(COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
}

/**
 * A read with its counts in one round trip (agents using it, secrets it holds): the
 * GET path is the hot one, and every extra query costs about 40% of its throughput.
 */
function selectWithCounts(db: Db, tenantId: string) {
  return db
    .selectFrom('environments as e')
    .select(COLUMNS.map((c) => `e.${c}` as const))
    .select((eb) => [
      eb
        .selectFrom('agents as a')
        .select(eb.fn.countAll<number>().as('n'))
        .whereRef('a.environment_id', '=', 'e.id')
        .where('a.tenant_id', '=', tenantId)
        .as('agent_count'),
      eb
        .selectFrom('secrets as s')
        .select(eb.fn.countAll<number>().as('n'))
        .whereRef('s.environment_id', '=', 'e.id')
        .where('s.tenant_id', '=', tenantId)
        .as('secret_count'),
    ])
    .where('e.tenant_id', '=', tenantId);
}

const findWithCounts = prepared('environment_with_counts', (db, p: { tenantId: string; id: string }) =>
  selectWithCounts(db, p.tenantId).where('e.id', '=', p.id),
);

/** What provisioning a sandbox reads of an environment (the conversation provisioner and the checkpoint build). */
export async function findEnvironmentForProvisioning(db: Db, tenantId: string, id: string) {
  return db
    .selectFrom('environments')
    .select([
      'id',
      'env_vars',
      'packages',
      'repos',
      'setup_script',
      'networking_type',
      'networking_config',
      'checkpoint_id',
    ])
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
}

export async function findEnvironmentWithCounts(db: Db, tenantId: string, id: string) {
  return await findWithCounts.first(db, { tenantId, id });
}

export async function listEnvironmentsWithCounts(db: Db, tenantId: string) {
  return await selectWithCounts(db, tenantId).orderBy('e.name').execute();
}

export async function findEnvironmentByName(db: Db, tenantId: string, name: string) {
  return await db
    .selectFrom('environments')
    .select(COLUMNS)
    .where('tenant_id', '=', tenantId)
    .where('name', '=', name)
    .executeTakeFirst();
}

export async function insertEnvironment(db: Db, tenantId: string, id: string, input: EnvironmentInput) {
  return await db
    .insertInto('environments')
    .values({ id, tenant_id: tenantId, ...jsonFields(input) })
    .returning(COLUMNS)
    .executeTakeFirstOrThrow();
}

export async function updateEnvironment(db: Db, tenantId: string, id: string, input: EnvironmentInput) {
  const fields = jsonFields(input);
  return await db
    .updateTable('environments')
    .set({
      ...fields,
      // A checkpoint holds what packages, repos and the setup script produced: a change to any
      // of them makes it stale (the next conversation takes the cold path).
      checkpoint_id: sql<
        string | null
      >`CASE WHEN packages = ${fields.packages}::jsonb AND repos = ${fields.repos}::jsonb
        AND setup_script IS NOT DISTINCT FROM ${fields.setup_script} THEN checkpoint_id ELSE NULL END`,
      updated_at: sql<Date>`now()`,
    })
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .returning(COLUMNS)
    .executeTakeFirst();
}

export async function deleteEnvironment(db: Db, tenantId: string, id: string): Promise<boolean> {
  const res = await db
    .deleteFrom('environments')
    .where('tenant_id', '=', tenantId)
    .where('id', '=', id)
    .executeTakeFirst();
  return Number(res.numDeletedRows) > 0;
}

export async function countAgentsByEnvironment(
  db: Db,
  tenantId: string,
  environmentIds: readonly string[],
): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  if (environmentIds.length === 0) return out;
  const rows = await db
    .selectFrom('agents')
    .select(['environment_id', (eb) => eb.fn.countAll<number>().as('n')])
    .where('tenant_id', '=', tenantId)
    .where('environment_id', 'in', environmentIds)
    .groupBy('environment_id')
    .execute();
  for (const r of rows) if (r.environment_id) out.set(r.environment_id, Number(r.n));
  return out;
}
