// Migration 0029 on a database that already has history: the sandboxes and turns that had ended
// before it are metered once, with created_at their end (so the 400-day retention counts from
// there), and the migration run again (another replica booting) adds nothing.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import { type DatabaseHandle, openDatabase } from '../src/db/database.ts';
import { loadMigrations, migrate } from '../src/db/migrate.ts';
import { insertConversation, insertTurn } from './helpers/conversation-rows.ts';
import { createTestDatabase, type TestDatabase, withAdmin } from './helpers/database.ts';
import { createVerifiedUser } from './helpers/factories.ts';

let t: TestDatabase;
let fresh: DatabaseHandle;
let name: string;
before(async () => {
  t = await createTestDatabase();
  name = `u_${Date.now().toString(36)}`;
  await withAdmin((c) => c.query(`CREATE DATABASE ${name}`));
  const url = new URL(t.url);
  url.pathname = `/${name}`;
  fresh = openDatabase({ connectionString: url.toString(), max: 3 });
});
after(async () => {
  await fresh?.close();
  await withAdmin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
  await t?.drop();
});

describe('migration 0029 (usage events)', () => {
  it('meters the sandboxes and turns that ended before it, once', async () => {
    const all = await loadMigrations();
    await migrate(
      fresh.db,
      fresh.pool,
      all.filter((m) => m.name < '0029'),
    );
    const db = fresh.db;
    const user = await createVerifiedUser(db);
    const conv = await insertConversation(db, user.id, { status: 'idle' });
    const sandbox = uuidv7();
    const ready = new Date('2025-06-01T10:00:00Z');
    await db
      .insertInto('sandboxes')
      .values({
        id: sandbox,
        tenant_id: user.id,
        conversation_id: conv.id,
        name: `service-old-${sandbox.slice(-8)}`,
        status: 'terminated',
        created_at: new Date('2025-06-01T09:59:00Z'),
        ready_at: ready,
        ended_at: new Date('2025-06-01T11:00:00Z'),
      })
      .execute();
    const turn = await insertTurn(db, conv, 1);
    await db
      .updateTable('turns')
      .set({
        status: 'succeeded',
        sandbox_id: sandbox,
        started_at: new Date('2025-06-01T10:10:00Z'),
        ended_at: new Date('2025-06-01T10:20:00Z'),
        usage: JSON.stringify({ input_tokens: 10, output_tokens: 2 }),
      })
      .where('id', '=', turn)
      .execute();

    await migrate(fresh.db, fresh.pool, all);
    await migrate(fresh.db, fresh.pool, all);
    const rows = await sql<{
      kind: string;
      busy_seconds: number;
      parked_seconds: number;
      input_tokens: number | null;
      created_at: Date;
    }>`SELECT kind, busy_seconds, parked_seconds, input_tokens, created_at FROM usage_events ORDER BY kind`.execute(
      db,
    );
    assert.deepEqual(
      rows.rows.map((r) => [
        r.kind,
        r.busy_seconds,
        r.parked_seconds,
        r.input_tokens,
        r.created_at.toISOString(),
      ]),
      [
        ['sandbox', 600, 3000, null, '2025-06-01T11:00:00.000Z'],
        ['turn', 600, 0, 10, '2025-06-01T10:20:00.000Z'],
      ],
    );
  });
});
