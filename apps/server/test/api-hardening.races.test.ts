// Issue 14, findings 9 and 8 (apply part), written as the attacks: parallel DELETEs of one
// resource, and a bulk apply whose referenced environment disappears mid-apply.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';

let t: TestApp;
before(async () => {
  t = await buildTestApp();
});
after(async () => {
  await t.close();
});

const PARALLEL = 10;

async function create(user: TestUser, url: string, payload: Record<string, unknown>): Promise<string> {
  const res = await t.app.inject({ method: 'POST', url, headers: user.auth, payload });
  assert.ok(res.statusCode === 201 || res.statusCode === 200, res.body);
  return (res.json() as { id: string }).id;
}

/** Fires PARALLEL identical DELETEs at once and returns the sorted status codes. */
async function deleteInParallel(user: TestUser, url: string): Promise<number[]> {
  const answers = await Promise.all(
    Array.from({ length: PARALLEL }, () => t.app.inject({ method: 'DELETE', url, headers: user.auth })),
  );
  return answers.map((a) => a.statusCode).sort();
}

async function auditCount(user: TestUser, type: string): Promise<number> {
  const rows = await t.deps.db
    .selectFrom('audit_events')
    .select('id')
    .where('tenant_id', '=', user.id)
    .where('type', '=', type)
    .execute();
  return rows.length;
}

const oneWinner = (status: number) => [status, ...Array<number>(PARALLEL - 1).fill(404)].sort();

describe('parallel DELETEs of one resource (finding 9)', () => {
  for (const kind of ['environment', 'vault', 'agent'] as const) {
    it(`answers exactly one 204 and ${PARALLEL - 1} × 404 to ${PARALLEL} concurrent deletes of one ${kind}, with one audit row`, async () => {
      const user = await createVerifiedUser(t.deps.db);
      const body =
        kind === 'agent'
          ? { name: 'a1', model: 'anthropic/claude-sonnet-4-5', runtime: 'claude' }
          : { name: `${kind}-1` };
      const id = await create(user, `/api/${kind}s`, body);
      assert.deepEqual(await deleteInParallel(user, `/api/${kind}s/${id}`), oneWinner(204));
      assert.equal(await auditCount(user, `${kind}.deleted`), 1);
    });
  }

  for (const owner of ['environment', 'vault'] as const) {
    it(`answers exactly one 204 to ${PARALLEL} concurrent deletes of one ${owner} secret, with one audit row`, async () => {
      const user = await createVerifiedUser(t.deps.db);
      const id = await create(user, `/api/${owner}s`, { name: `${owner}-s` });
      await create(user, `/api/${owner}s/${id}/secrets`, { key: 'TOKEN', value: 'v' });
      assert.deepEqual(await deleteInParallel(user, `/api/${owner}s/${id}/secrets/TOKEN`), oneWinner(204));
      assert.equal(await auditCount(user, `${owner}.secret.deleted`), 1);
    });
  }

  it(`revokes an API key once when ${PARALLEL} revocations race: one success, the rest 404, one audit row`, async () => {
    const user = await createVerifiedUser(t.deps.db);
    const id = await create(user, '/api/auth/api-keys', { name: 'racy' });
    assert.deepEqual(await deleteInParallel(user, `/api/auth/api-keys/${id}`), oneWinner(200));
    assert.equal(await auditCount(user, 'api_key.revoked'), 1);
  });
});

describe('bulk apply when a referenced resource is deleted mid-apply (finding 8)', () => {
  it('reports the agent as an error with code "conflict", never "internal error", and applies the rest', async () => {
    const user = await createVerifiedUser(t.deps.db);
    // A concurrent DELETE landing between apply's lookup of the environment and the agent's
    // INSERT, made deterministic: a trigger deletes the environment just before that INSERT.
    await sql`
      CREATE FUNCTION test_delete_env_mid_apply() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        DELETE FROM environments WHERE id = NEW.environment_id;
        RETURN NEW;
      END $$`.execute(t.deps.db);
    await sql`
      CREATE TRIGGER test_delete_env_mid_apply BEFORE INSERT ON agents
      FOR EACH ROW WHEN (NEW.name = 'race-victim') EXECUTE FUNCTION test_delete_env_mid_apply()`.execute(
      t.deps.db,
    );
    try {
      await create(user, '/api/environments', { name: 'doomed' });
      const res = await t.app.inject({
        method: 'POST',
        url: '/api/apply',
        headers: user.auth,
        payload: {
          resources: [
            {
              kind: 'Agent',
              name: 'race-victim',
              spec: { model: 'anthropic/claude-sonnet-4-5', runtime: 'claude', environment: 'doomed' },
            },
            { kind: 'Vault', name: 'bystander', spec: {} },
          ],
        },
      });
      assert.equal(res.statusCode, 200, res.body);
      const body = res.json() as {
        results: Array<{ action: string; code?: string; errors?: Record<string, string[]> }>;
      };
      const [victim, bystander] = body.results;
      assert.equal(victim?.action, 'error');
      assert.equal(victim?.code, 'conflict');
      assert.ok(!JSON.stringify(victim?.errors).includes('internal error'), JSON.stringify(victim));
      assert.equal(bystander?.action, 'created');
      assert.ok(!t.logs.join('').includes('unexpected error on one resource'));
    } finally {
      await sql`DROP TRIGGER test_delete_env_mid_apply ON agents`.execute(t.deps.db);
      await sql`DROP FUNCTION test_delete_env_mid_apply()`.execute(t.deps.db);
    }
  });

  it('answers a PUT of an agent whose environment vanishes during the write with 409 conflict', async () => {
    const user = await createVerifiedUser(t.deps.db);
    await sql`
      CREATE FUNCTION test_delete_env_mid_put() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        DELETE FROM environments WHERE id = NEW.environment_id;
        RETURN NEW;
      END $$`.execute(t.deps.db);
    await sql`
      CREATE TRIGGER test_delete_env_mid_put BEFORE UPDATE ON agents
      FOR EACH ROW WHEN (NEW.name = 'put-victim') EXECUTE FUNCTION test_delete_env_mid_put()`.execute(
      t.deps.db,
    );
    try {
      const agent = { name: 'put-victim', model: 'anthropic/claude-sonnet-4-5', runtime: 'claude' };
      const id = await create(user, '/api/agents', agent);
      const envId = await create(user, '/api/environments', { name: 'doomed-too' });
      const res = await t.app.inject({
        method: 'PUT',
        url: `/api/agents/${id}`,
        headers: user.auth,
        payload: { ...agent, environment_id: envId },
      });
      assert.equal(res.statusCode, 409, res.body);
      assert.equal(res.json().error, 'conflict');
    } finally {
      await sql`DROP TRIGGER test_delete_env_mid_put ON agents`.execute(t.deps.db);
      await sql`DROP FUNCTION test_delete_env_mid_put()`.execute(t.deps.db);
    }
  });
});
