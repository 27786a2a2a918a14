// One fresh database per test file, cloned from the migrated template that `npm test`
// (scripts/test.ts) prepares. Run a single file with `npm test -- <file>`.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { type DatabaseHandle, openDatabase } from '../../src/db/database.ts';

export interface TestDatabase {
  url: string;
  name: string;
  handle: DatabaseHandle;
  drop(): Promise<void>;
}

function adminUrl(): string {
  const url = process.env['PADDOCK_TEST_PG_ADMIN_URL'];
  if (!url)
    throw new Error(
      'run server tests through `npm test` (it starts the test PostgreSQL): npm test -- <file>',
    );
  return url;
}

export async function withAdmin<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: adminUrl() });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const template = process.env['PADDOCK_TEST_PG_TEMPLATE'] ?? 'paddock_template';
  const name = `t_${randomBytes(6).toString('hex')}`;
  // CREATE DATABASE ... TEMPLATE fails while another session is copying the same
  // template; parallel test files retry briefly.
  for (let attempt = 0; ; attempt++) {
    try {
      await withAdmin((c) => c.query(`CREATE DATABASE ${name} TEMPLATE ${template}`));
      break;
    } catch (err) {
      if (attempt >= 50 || !/being accessed by other users/.test(String(err))) throw err;
      await new Promise((r) => setTimeout(r, 50 + Math.random() * 100));
    }
  }
  const url = new URL(adminUrl());
  url.pathname = `/${name}`;
  const handle = openDatabase({ connectionString: url.toString(), max: 10, connectionTimeoutMillis: 3000 });
  return {
    url: url.toString(),
    name,
    handle,
    drop: async () => {
      await handle.close();
      await withAdmin((c) => c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
    },
  };
}
