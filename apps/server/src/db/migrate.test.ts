import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { createTestDatabase, type TestDatabase, withAdmin } from '../../test/helpers/database.ts';
import { openDatabase } from './database.ts';
import { loadMigrations, migrate } from './migrate.ts';

describe('migrations', () => {
  let t: TestDatabase;
  before(async () => {
    t = await createTestDatabase();
  });
  after(async () => {
    await t.drop();
  });

  it('are idempotent: a second run against a migrated database applies nothing', async () => {
    const result = await migrate(t.handle.db, t.handle.pool);
    assert.deepEqual(result.applied, []);
  });

  it('record every migration file exactly once', async () => {
    const files = (await loadMigrations()).map((m) => m.name);
    const rows = await sql<{ name: string }>`SELECT name FROM paddock_migrations ORDER BY name`.execute(
      t.handle.db,
    );
    assert.deepEqual(
      rows.rows.map((r) => r.name),
      files,
    );
  });

  it('serialize replicas booting together on an empty database (advisory lock)', async () => {
    const name = `m_${Date.now().toString(36)}`;
    await withAdmin((c) => c.query(`CREATE DATABASE ${name}`));
    const url = new URL(t.url);
    url.pathname = `/${name}`;
    const replicas = Array.from({ length: 4 }, () =>
      openDatabase({ connectionString: url.toString(), max: 3 }),
    );
    try {
      const results = await Promise.all(replicas.map((r) => migrate(r.db, r.pool)));
      const applied = results.flatMap((r) => r.applied);
      const files = (await loadMigrations()).map((m) => m.name);
      assert.deepEqual([...applied].sort(), files, 'each migration applied by exactly one replica');
      const rows = await sql<{ n: number }>`SELECT count(*)::int AS n FROM paddock_migrations`.execute(
        replicas[0]!.db,
      );
      assert.equal(rows.rows[0]?.n, files.length);
    } finally {
      await Promise.all(replicas.map((r) => r.close()));
      await withAdmin((c) => c.query(`DROP DATABASE ${name} WITH (FORCE)`));
    }
  });

  it('roll back a failing migration completely and leave it unapplied', async () => {
    const failing = [
      {
        name: '9999_broken',
        // biome-ignore lint/suspicious/noExplicitAny: migrations are untyped
        up: async (db: any) => {
          await sql`CREATE TABLE half_done (id int)`.execute(db);
          await sql`SELECT * FROM no_such_table`.execute(db);
        },
      },
    ];
    await assert.rejects(migrate(t.handle.db, t.handle.pool, failing));
    const exists = await sql<{ t: string | null }>`SELECT to_regclass('half_done')::text AS t`.execute(
      t.handle.db,
    );
    assert.equal(exists.rows[0]?.t, null);
    const row = await sql`SELECT 1 FROM paddock_migrations WHERE name = '9999_broken'`.execute(t.handle.db);
    assert.equal(row.rows.length, 0);
  });
});
