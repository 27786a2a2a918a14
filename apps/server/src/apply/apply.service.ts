// Bulk apply: upsert by name in the fixed order environments → vaults → agents, one
// transaction per resource (resource and its secrets commit together or not at all),
// best-effort across resources. Idempotent: unchanged fields and secrets (keyed MAC) write
// nothing, so a second identical apply reports every resource "unchanged".
//
// Dry run (`?dry_run=true`, the console's diff before an import): the same code runs inside
// one outer transaction that is always rolled back, each resource under a savepoint, so the
// plan is exactly what an apply would report (secrets compared by their keyed MAC, an agent
// seeing the environments of the same manifest) and nothing is written or audited
// (test/apply.http.test.ts "dry run").
import type { z } from 'zod';
import { delegateIdsByAgent, findAgentByName } from '../agents/agents.repo.ts';
import type { AgentsService } from '../agents/agents.service.ts';
import type { AuditService } from '../audit/audit.service.ts';
import type { Db } from '../db/database.ts';
import { findEnvironmentByName } from '../environments/environments.repo.ts';
import type { EnvironmentsService } from '../environments/environments.service.ts';
import { AppError, type ErrorCode, type FieldErrors } from '../http/errors.ts';
import { capFieldErrors } from '../http/json-bounds.ts';
import type { Logger } from '../observability/logger.ts';
import type { ResourceContext } from '../resources/context.ts';
import { resourceName } from '../resources/fields.ts';
import type { SecretOwner, SecretsService } from '../secrets/secrets.service.ts';
import { findVaultsByNames } from '../vaults/vaults.repo.ts';
import type { VaultsService } from '../vaults/vaults.service.ts';
import {
  AgentSpec,
  type ApplyRequest,
  type ApplyResponseT,
  type ApplyResultT,
  EnvironmentSpec,
  KINDS,
  type Kind,
  VaultSpec,
} from './apply.schema.ts';

export interface ApplyService {
  apply(ctx: ResourceContext, request: ApplyRequest, options?: { dryRun?: boolean }): Promise<ApplyResponseT>;
}

const ORDER: Record<Kind, number> = { Environment: 0, Vault: 1, Agent: 2 };

/** Thrown inside a resource's transaction to roll it back and report field errors. */
class ResourceError extends Error {
  readonly errors: FieldErrors;
  readonly code: ErrorCode;
  constructor(errors: FieldErrors, code: ErrorCode = 'validation_failed') {
    super('resource refused');
    this.errors = errors;
    this.code = code;
  }
}

function zodErrors(error: z.ZodError, prefix: string): FieldErrors {
  const out: FieldErrors = {};
  for (const issue of error.issues) {
    const path = [prefix, ...issue.path.map(String)].filter((p) => p !== '').join('.');
    out[path] = [...(out[path] ?? []), issue.message];
  }
  return out;
}

export function createApplyService(deps: {
  db: Db;
  logger: Logger;
  audit: Pick<AuditService, 'record'>;
  secrets: SecretsService;
  environments: EnvironmentsService;
  vaults: VaultsService;
  agents: AgentsService;
}): ApplyService {
  const writeSecrets = async (
    trx: Db,
    ctx: ResourceContext,
    owner: SecretOwner,
    values: Record<string, string> | undefined,
  ): Promise<Record<string, 'created' | 'updated' | 'unchanged'> | undefined> => {
    if (!values) return undefined;
    const outcomes: Record<string, 'created' | 'updated' | 'unchanged'> = {};
    for (const [key, value] of Object.entries(values)) {
      const { outcome } = await deps.secrets.upsert(ctx.tenantId, owner, key, value, trx);
      outcomes[key] = outcome;
      if (outcome !== 'unchanged') {
        await deps.audit.record(
          {
            type: `${owner.kind}.secret.upserted`,
            tenantId: ctx.tenantId,
            actor: ctx.actor,
            ip: ctx.ip,
            metadata: { [`${owner.kind}_id`]: owner.id, key, outcome, via: 'apply' },
          },
          trx,
        );
      }
    }
    return outcomes;
  };

  type ParsedSpec =
    | { kind: 'Environment'; data: z.output<typeof EnvironmentSpec> }
    | { kind: 'Vault'; data: z.output<typeof VaultSpec> }
    | { kind: 'Agent'; data: z.output<typeof AgentSpec> };

  /** Pure validation, before any transaction is opened: a refused spec costs no round trip. */
  const parseSpec = (kind: Kind, spec: Record<string, unknown>): ParsedSpec => {
    const schema = kind === 'Environment' ? EnvironmentSpec : kind === 'Vault' ? VaultSpec : AgentSpec;
    const parsed = schema.safeParse(spec);
    if (!parsed.success) throw new ResourceError(zodErrors(parsed.error, 'spec'));
    return { kind, data: parsed.data } as ParsedSpec;
  };

  const applyOne = async (
    trx: Db,
    ctx: ResourceContext,
    name: string,
    parsed: ParsedSpec,
  ): Promise<Omit<ApplyResultT, 'kind' | 'name'>> => {
    if (parsed.kind === 'Environment') {
      const { secrets, ...fields } = parsed.data;
      const { id, action } = await deps.environments.upsertByName(ctx, { name, ...fields }, trx);
      const outcomes = await writeSecrets(trx, ctx, { kind: 'environment', id }, secrets);
      return { id, action: bump(action, outcomes), ...(outcomes ? { secrets: outcomes } : {}) };
    }
    if (parsed.kind === 'Vault') {
      const { secrets, ...fields } = parsed.data;
      const { id, action } = await deps.vaults.upsertByName(ctx, { name, ...fields }, trx);
      const outcomes = await writeSecrets(trx, ctx, { kind: 'vault', id }, secrets);
      return { id, action: bump(action, outcomes), ...(outcomes ? { secrets: outcomes } : {}) };
    }
    const { environment, vaults, ...fields } = parsed.data;
    let environmentId: string | null = null;
    if (environment !== null) {
      const env = await findEnvironmentByName(trx, ctx.tenantId, environment);
      if (!env)
        throw new ResourceError(
          { 'spec.environment': [`environment "${environment}" not found`] },
          'not_found',
        );
      environmentId = env.id;
    }
    const found = await findVaultsByNames(trx, ctx.tenantId, vaults);
    const missing = vaults.filter((v) => !found.some((f) => f.name === v));
    if (missing.length > 0) {
      throw new ResourceError({ 'spec.vaults': missing.map((v) => `vault "${v}" not found`) }, 'not_found');
    }
    // A manifest does not name delegations (docs/security.md): an agent keeps the ones it has.
    const existing = await findAgentByName(trx, ctx.tenantId, name);
    const delegates = existing
      ? ((await delegateIdsByAgent(trx, ctx.tenantId, [existing.id])).get(existing.id) ?? [])
      : [];
    const { id, action } = await deps.agents.upsertByName(
      ctx,
      {
        name,
        ...fields,
        environment_id: environmentId,
        vault_ids: found.map((f) => f.id),
        delegate_agent_ids: delegates,
      },
      trx,
    );
    return { id, action };
  };

  return {
    async apply(ctx, request, options = {}) {
      const results: ApplyResultT[] = request.resources.map((r) => ({
        kind: r.kind,
        name: r.name,
        action: 'error',
        id: null,
      }));
      const seen = new Set<string>();
      const queue: Array<{ index: number; kind: Kind }> = [];
      request.resources.forEach((r, index) => {
        const errors: FieldErrors = {};
        if (!(KINDS as readonly string[]).includes(r.kind))
          errors['kind'] = [`must be one of ${KINDS.join(', ')}`];
        const nameCheck = resourceName.safeParse(r.name);
        if (!nameCheck.success) errors['name'] = nameCheck.error.issues.map((i) => i.message);
        const identity = `${r.kind}/${r.name}`;
        if (Object.keys(errors).length === 0 && seen.has(identity))
          errors['name'] = ['appears twice in the manifest'];
        seen.add(identity);
        if (Object.keys(errors).length > 0)
          results[index] = { ...results[index]!, code: 'validation_failed', errors };
        else queue.push({ index, kind: r.kind as Kind });
      });
      queue.sort((a, b) => ORDER[a.kind] - ORDER[b.kind] || a.index - b.index);

      if (queue.length > 0) await deps.secrets.ensureTenantKey(ctx.tenantId);
      const dry = options.dryRun ? await deps.db.startTransaction().execute() : null;
      try {
        for (const { index, kind } of queue) {
          const r = request.resources[index]!;
          try {
            const parsed = parseSpec(kind, r.spec);
            const work = (trx: Db) => applyOne(trx, ctx, r.name, parsed);
            let outcome: Awaited<ReturnType<typeof work>>;
            if (dry) {
              const sp = await dry.savepoint('resource').execute();
              try {
                outcome = await work(sp);
                await sp.releaseSavepoint('resource').execute();
              } catch (err) {
                // A failed resource is undone at once, so the outer transaction stays usable.
                await sp.rollbackToSavepoint('resource').execute();
                throw err;
              }
              // The id of a resource the dry run created is rolled back with it.
              if (outcome.action === 'created') outcome = { ...outcome, id: null };
            } else {
              outcome = await deps.db.transaction().execute(work);
            }
            results[index] = { kind: r.kind, name: r.name, ...outcome };
          } catch (err) {
            results[index] = { ...results[index]!, ...failureOf(err, deps.logger) };
          }
        }
      } finally {
        await dry?.rollback().execute();
      }

      const summary = { created: 0, updated: 0, unchanged: 0, error: 0 };
      for (const r of results) summary[r.action] += 1;
      if (dry) return { results, summary };
      await deps.audit.record({
        type: 'apply.completed',
        tenantId: ctx.tenantId,
        actor: ctx.actor,
        ip: ctx.ip,
        metadata: {
          ...summary,
          resources: results.map((r) => ({ kind: r.kind, name: r.name, action: r.action })),
        },
      });
      return { results, summary };
    },
  };
}

/** A resource whose fields are unchanged but whose secrets changed is reported "updated". */
function bump(
  action: 'created' | 'updated' | 'unchanged',
  outcomes: Record<string, string> | undefined,
): 'created' | 'updated' | 'unchanged' {
  if (action !== 'unchanged' || !outcomes) return action;
  return Object.values(outcomes).some((o) => o !== 'unchanged') ? 'updated' : 'unchanged';
}

/**
 * What a failed resource reports: a machine code and field errors. Database races (a name
 * taken or a reference deleted by a concurrent request) are conflicts the caller can retry,
 * never "internal error" (api-hardening.races.test.ts).
 */
function failureOf(
  err: unknown,
  logger: Logger,
): { code: ErrorCode; errors: FieldErrors; more_errors?: number } {
  if (err instanceof ResourceError) return { code: err.code, ...capFieldErrors(err.errors) };
  if (err instanceof AppError) {
    const fieldErrors = err.extra['errors'] as FieldErrors | undefined;
    return { code: err.code, ...capFieldErrors(fieldErrors ?? { resource: [err.message] }) };
  }
  const pgCode = (err as { code?: string } | null)?.code;
  // A concurrent apply created the same name between our lookup and insert.
  if (pgCode === '23505') {
    return {
      code: 'conflict',
      errors: { name: ['was created concurrently by another request; apply again'] },
    };
  }
  if (pgCode === '23503') {
    return {
      code: 'conflict',
      errors: { resource: ['a referenced resource was deleted while this apply ran; apply again'] },
    };
  }
  logger.error({ err }, 'bulk apply: unexpected error on one resource');
  return { code: 'internal_error', errors: { resource: ['internal error'] } };
}
