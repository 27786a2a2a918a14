// Account deletion of a large account: how long the one deletion path
// (apps/server/src/accounts/account-deletion.ts) takes for an account holding many
// conversations and log rows, against the baseline of the bare cascade (`DELETE FROM users`)
// on an identical account in the same run. Starts a throw-away embedded PostgreSQL and builds
// the real deps (no sandbox backend: the seeded sandboxes are terminated ones).
//   node scripts/bench-account-delete.ts [conversations=50] [log rows per conversation=4000]
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import type { Db } from '../apps/server/src/db/database.ts';
import { createVerifiedUser } from '../apps/server/test/helpers/factories.ts';
import { appOnDatabase, startScratchPostgres } from '../apps/server/test/helpers/scratch.ts';

const conversations = Number(process.argv[2] ?? 50);
const rowsPerConversation = Number(process.argv[3] ?? 4000);
const RUNS = 4;

/** An account with an environment, a vault, an agent and `conversations` conversations, each with turns and log rows. */
async function seed(db: Db): Promise<string> {
  const user = await createVerifiedUser(db);
  const tenant = user.id;
  const env = uuidv7();
  const agent = uuidv7();
  // Raw inserts: the tables' defaults fill the rest.
  await sql`INSERT INTO environments (id, tenant_id, name) VALUES (${env}, ${tenant}, 'env')`.execute(db);
  await sql`INSERT INTO agents (id, tenant_id, name, runtime, model, environment_id)
            VALUES (${agent}, ${tenant}, 'agent', 'claude', 'anthropic/claude-sonnet-4-5', ${env})`.execute(
    db,
  );
  for (let i = 0; i < conversations; i++) {
    const conv = uuidv7();
    await db
      .insertInto('conversations')
      .values({ id: conv, tenant_id: tenant, agent_id: agent, status: 'idle', source: 'api', title: `c${i}` })
      .execute();
    await db
      .insertInto('sandboxes')
      .values({
        id: uuidv7(),
        tenant_id: tenant,
        conversation_id: conv,
        name: `bench-${conv}`,
        status: 'terminated',
      })
      .execute();
    await sql`
      INSERT INTO turns (id, tenant_id, conversation_id, seq, prompt, status)
      SELECT gen_random_uuid(), ${tenant}, ${conv}, s, 'echo hello', 'succeeded' FROM generate_series(1, 10) s`.execute(
      db,
    );
    await sql`
      INSERT INTO log_events (tenant_id, conversation_id, stream, data)
      SELECT ${tenant}, ${conv}, 'stdout', convert_to(repeat('x', 200), 'UTF8') FROM generate_series(1, ${rowsPerConversation})`.execute(
      db,
    );
  }
  return tenant;
}

const scratch = await startScratchPostgres({ database: 'bench' });
try {
  const { deps, close } = await appOnDatabase(scratch.pg.url);
  const admin = await createVerifiedUser(deps.db, { isAdmin: true });
  const principal = {
    userId: admin.id,
    tenantId: admin.id,
    email: admin.email,
    isAdmin: true,
    via: 'api_key' as const,
    apiKeyId: admin.apiKeyId,
    sessionId: null,
    scope: 'full' as const,
    conversationId: null,
  };
  const bare: number[] = [];
  const full: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    const a = await seed(deps.db);
    const b = await seed(deps.db);
    await sql`VACUUM ANALYZE`.execute(deps.db);
    const timed = async (into: number[], fn: () => Promise<unknown>) => {
      const t0 = process.hrtime.bigint();
      await fn();
      into.push(Number(process.hrtime.bigint() - t0) / 1e6);
    };
    const cascade = () => timed(bare, () => deps.db.deleteFrom('users').where('id', '=', a).execute());
    const path = () => timed(full, () => deps.accountDeletion.deleteByAdmin(principal, b, { ip: null }));
    // Alternate which goes first, so a warm cache favours neither.
    if (run % 2 === 0) {
      await cascade();
      await path();
    } else {
      await path();
      await cascade();
    }
  }
  const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
  const mb = median(bare);
  const mf = median(full);
  console.log(
    `account deletion, ${conversations} conversations × ${rowsPerConversation} log rows (${(conversations * rowsPerConversation).toLocaleString('en')} rows), ${RUNS} runs`,
  );
  console.log(`  bare cascade (DELETE FROM users): median ${mb.toFixed(0)} ms`);
  console.log(
    `  the deletion path:                median ${mf.toFixed(0)} ms  (${(mf / mb).toFixed(2)}× the bare cascade)`,
  );
  await close();
} finally {
  await scratch.remove();
}
