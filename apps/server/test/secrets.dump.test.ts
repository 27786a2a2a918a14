// "A database dump after creating secrets contains none of the plaintext values."
// The embedded PostgreSQL package ships no pg_dump (only initdb, pg_ctl, postgres) and the
// machine's PostgreSQL 15 client tools refuse a 17 server, so the dump is a full-table text
// scan: every row of every table in every non-system schema, rendered as PostgreSQL's own
// text form (`SELECT t::text`, the same rendering COPY/pg_dump write; bytea as hex). Each
// plaintext is searched as text, as hex (a bytea column) and as base64.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createVerifiedUser } from './helpers/factories.ts';

let t: TestApp;
before(async () => {
  t = await buildTestApp();
});
after(async () => {
  await t.close();
});

async function fullTextDump(): Promise<string> {
  const tables = await t.deps.database.pool.query<{ schemaname: string; tablename: string }>(
    `SELECT schemaname, tablename FROM pg_tables
      WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2`,
  );
  assert.ok(tables.rows.some((r) => r.tablename === 'secrets'));
  const parts: string[] = [];
  for (const { schemaname, tablename } of tables.rows) {
    const ident = `"${schemaname.replaceAll('"', '""')}"."${tablename.replaceAll('"', '""')}"`;
    const rows = await t.deps.database.pool.query<{ row: string }>(`SELECT t::text AS row FROM ${ident} t`);
    parts.push(`-- ${ident}`, ...rows.rows.map((r) => r.row));
  }
  return parts.join('\n');
}

describe('database dump', () => {
  it('contains none of the plaintext secret values', async () => {
    const values = [
      'env-plaintext-Zq8w3',
      'vault-plaintext-Kx7p1',
      'applied-plaintext-Mm4r9',
      'updated-plaintext-Pp2t6',
    ];
    const alice = await createVerifiedUser(t.deps.db);
    const bob = await createVerifiedUser(t.deps.db);
    for (const user of [alice, bob]) {
      const env = (
        await t.app.inject({
          method: 'POST',
          url: '/api/environments',
          headers: user.auth,
          payload: { name: 'e' },
        })
      ).json().id;
      const vault = (
        await t.app.inject({ method: 'POST', url: '/api/vaults', headers: user.auth, payload: { name: 'v' } })
      ).json().id;
      for (const [url, value] of [
        [`/api/environments/${env}/secrets`, values[0]],
        [`/api/vaults/${vault}/secrets`, values[1]],
        [`/api/environments/${env}/secrets`, values[3]], // overwrites the first: old value must be gone too
      ] as const) {
        const res = await t.app.inject({
          method: 'POST',
          url,
          headers: user.auth,
          payload: { key: 'TOKEN', value },
        });
        assert.ok(res.statusCode < 300, res.body);
      }
      const applied = await t.app.inject({
        method: 'POST',
        url: '/api/apply',
        headers: user.auth,
        payload: {
          resources: [{ kind: 'Vault', name: 'applied', spec: { secrets: { API_KEY: values[2] } } }],
        },
      });
      assert.equal(applied.json().results[0].action, 'created');
    }

    const dump = await fullTextDump();
    assert.ok(dump.includes('TOKEN'), 'the scan sees secret key names');
    const lower = dump.toLowerCase();
    for (const value of values) {
      assert.ok(!dump.includes(value), `plaintext ${value} found in the dump`);
      assert.ok(!lower.includes(Buffer.from(value).toString('hex')), `hex of ${value} found in the dump`);
      assert.ok(
        !dump.includes(Buffer.from(value).toString('base64').slice(0, 16)),
        `base64 of ${value} found`,
      );
    }
    const logs = t.logs.join('');
    for (const value of values) assert.ok(!logs.includes(value), `plaintext ${value} found in the logs`);
  });
});
