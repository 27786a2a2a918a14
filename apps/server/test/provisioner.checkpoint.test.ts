// Environment checkpoints and the warm path, against a real sandboxd (issue 9 acceptance:
// "a conversation on an environment with a checkpoint skips packages/clone/setup (stage events
// show checkpoint_restore), and a corrupted checkpoint id falls back to the cold path").
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import {
  createEnvironment,
  newConversation,
  type ProvisionHarness,
  provisionerFor,
  sandboxRow,
  sh,
  stagesOf,
  startProvisionHarness,
} from './helpers/provisioning.ts';

let h: ProvisionHarness;
before(async () => {
  h = await startProvisionHarness();
});
after(async () => {
  await h?.close();
});

const SETUP =
  'echo "setup with $BUILD_SECRET"\necho built-by-setup > /home/sandbox/from-setup\nmkdir -p /home/sandbox/tools && echo tool > /home/sandbox/tools/t';

async function checkpointIdOf(id: string): Promise<string | null> {
  const row = await h.t.deps.db
    .selectFrom('environments')
    .select('checkpoint_id')
    .where('id', '=', id)
    .executeTakeFirstOrThrow();
  return row.checkpoint_id;
}

describe('environment checkpoints', () => {
  test('POST /checkpoint (NDJSON progress) → warm path: checkpoint_restore, no packages/clone/setup; files from setup present; secrets not in the checkpoint', async () => {
    const environmentId = await createEnvironment(h, {
      setup_script: SETUP,
      secrets: { BUILD_SECRET: 'build-secret-value-42' },
      networking_type: 'limited',
      networking_config: { allowed_hosts: [] },
    });
    const res = await h.t.app.inject({
      method: 'POST',
      url: `/api/environments/${environmentId}/checkpoint`,
      headers: { ...h.user.auth, accept: 'application/x-ndjson' },
    });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /application\/x-ndjson/);
    const lines = res.body
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const stages = lines.filter((l) => l['type'] === 'stage').map((l) => `${l['stage']}:${l['state']}`);
    assert.deepEqual(stages, [
      'provision:started',
      'provision:done',
      'network:started',
      'network:done',
      'setup:started',
      'setup:done',
      'checkpoint:started',
      'checkpoint:done',
    ]);
    assert.ok(lines.some((l) => l['type'] === 'stdout' && l['text'] === 'setup with [REDACTED]\n'));
    assert.ok(!res.body.includes('build-secret-value-42'));
    const done = lines.at(-1) as { type: string; environment: { checkpoint_id: string } };
    assert.equal(done.type, 'done');
    const checkpointId = await checkpointIdOf(environmentId);
    assert.ok(checkpointId);
    assert.equal(done.environment.checkpoint_id, checkpointId);
    // The build sandbox is gone.
    assert.deepEqual(
      (await h.client.list({ prefix: `paddock-${h.user.id.replaceAll('-', '').slice(0, 8)}-` })).length,
      0,
    );

    const c = await newConversation(h, { environmentId, skills: [{ name: 'warm-skill', content: 'warm' }] });
    const result = await provisionerFor(h).provision(c.input);
    assert.equal(result.path, 'warm');
    assert.deepEqual(stagesOf(c.writer.rows), [
      'provision:started',
      'provision:done',
      'checkpoint_restore:started',
      'checkpoint_restore:done',
      'network:started',
      'network:done',
    ]);
    const name = c.input.sandboxName;
    assert.equal(await sh(h.client, name, 'cat from-setup tools/t'), 'built-by-setup\ntool\n');
    // Env file and skills are written again after the restore; the setup script was not kept.
    assert.equal(
      await sh(h.client, name, '. .paddock/env && printf %s "$BUILD_SECRET"'),
      'build-secret-value-42',
    );
    assert.equal(await sh(h.client, name, 'cat .test-runtime/skills/warm-skill/SKILL.md'), 'warm');
    assert.equal(await sh(h.client, name, 'ls .paddock'), 'env\n');
    assert.equal((await sandboxRow(h, c.input.sandboxId)).checkpoint_id, checkpointId);
    await h.client.destroy(name);
  });

  test('POST /checkpoint without NDJSON waits and answers 201 with the environment; 404 for a foreign or unknown id', async () => {
    const environmentId = await createEnvironment(h, { setup_script: 'echo hi > /home/sandbox/hi' });
    const res = await h.t.app.inject({
      method: 'POST',
      url: `/api/environments/${environmentId}/checkpoint`,
      headers: h.user.auth,
    });
    assert.equal(res.statusCode, 201);
    const body = res.json() as { id: string; checkpoint_id: string };
    assert.equal(body.id, environmentId);
    assert.equal(body.checkpoint_id, await checkpointIdOf(environmentId));
    const other = await (await import('./helpers/factories.ts')).createVerifiedUser(h.t.deps.db);
    for (const headers of [other.auth, { ...other.auth, accept: 'application/x-ndjson' }]) {
      const foreign = await h.t.app.inject({
        method: 'POST',
        url: `/api/environments/${environmentId}/checkpoint`,
        headers,
      });
      assert.equal(foreign.statusCode, 404);
      assert.equal(foreign.json().error, 'not_found');
    }
    const bad = await h.t.app.inject({
      method: 'POST',
      url: '/api/environments/not-a-uuid/checkpoint',
      headers: h.user.auth,
    });
    assert.equal(bad.statusCode, 404);
  });

  test('the build sandbox is owed a destroy while it exists (a process that dies mid-build still gets it destroyed); none is left after', async () => {
    const environmentId = await createEnvironment(h, { setup_script: 'sleep 1' });
    const prefix = `paddock-${h.user.id.replaceAll('-', '').slice(0, 8)}-`;
    const owed = () =>
      h.t.deps.db
        .selectFrom('sandbox_destroys')
        .select(['name', sql<number>`extract(epoch from next_at - now())::float8`.as('due_in_s')])
        .where('tenant_id', '=', h.user.id)
        .execute();
    const build = h.t.app.inject({
      method: 'POST',
      url: `/api/environments/${environmentId}/checkpoint`,
      headers: h.user.auth,
    });
    let during: { name: string; due_in_s: number }[] = [];
    let live: string[] = [];
    while (live.length === 0) {
      live = (await h.client.list({ prefix })).map((s) => s.name);
      during = await owed();
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.deepEqual(
      during.map((r) => r.name),
      live,
    );
    assert.ok((during[0]?.due_in_s ?? 0) > 5 * 3600, 'due only after the longest build');
    assert.equal((await build).statusCode, 201);
    assert.deepEqual(await owed(), []);
    assert.equal((await h.client.list({ prefix })).length, 0);
  });

  test('a failing setup script: the build answers 422 with the reason, stores nothing, leaves no sandbox', async () => {
    const environmentId = await createEnvironment(h, { setup_script: 'echo nope >&2; exit 3' });
    const res = await h.t.app.inject({
      method: 'POST',
      url: `/api/environments/${environmentId}/checkpoint`,
      headers: h.user.auth,
    });
    assert.equal(res.statusCode, 422);
    assert.match(res.json().message, /setup script failed \(exit 3\)/);
    assert.equal(await checkpointIdOf(environmentId), null);
    assert.equal(
      (await h.client.list({ prefix: `paddock-${h.user.id.replaceAll('-', '').slice(0, 8)}-` })).length,
      0,
    );
  });

  test('a corrupted checkpoint id: checkpoint_restore failed, the id is cleared, the cold path runs', async () => {
    const environmentId = await createEnvironment(h, {
      setup_script: SETUP,
      secrets: { BUILD_SECRET: 'x-secret-value-1' },
    });
    await h.t.deps.db
      .updateTable('environments')
      .set({ checkpoint_id: 'ckpt-does-not-exist' })
      .where('id', '=', environmentId)
      .execute();
    const c = await newConversation(h, { environmentId });
    const result = await provisionerFor(h).provision(c.input);
    assert.equal(result.path, 'cold');
    assert.deepEqual(stagesOf(c.writer.rows), [
      'provision:started',
      'provision:done',
      'checkpoint_restore:started',
      'checkpoint_restore:failed',
      'setup:started',
      'setup:done',
    ]);
    const failed = c.writer.rows.find((r) => r.stage?.state === 'failed');
    assert.match(failed?.stage?.message ?? '', /could not be restored .* provisioned from scratch/);
    assert.equal(await checkpointIdOf(environmentId), null);
    assert.equal(await sh(h.client, c.input.sandboxName, 'cat from-setup'), 'built-by-setup\n');
    assert.equal((await sandboxRow(h, c.input.sandboxId)).status, 'ready');
    await h.client.destroy(c.input.sandboxName);
  });

  test('changing packages, repos or the setup script clears checkpoint_id; other changes keep it', async () => {
    const ctx = { tenantId: h.user.id, actor: { kind: 'system' as const }, ip: null };
    const environmentId = await createEnvironment(h, { setup_script: 'true' });
    const base = await h.t.deps.environments.get(ctx, environmentId);
    const input = {
      name: base.name,
      env_vars: base.env_vars,
      packages: base.packages,
      repos: base.repos,
      setup_script: base.setup_script,
      networking_type: base.networking_type,
      networking_config: base.networking_config,
      metadata: base.metadata,
    };
    const set = () =>
      h.t.deps.db
        .updateTable('environments')
        .set({ checkpoint_id: 'ckpt-1' })
        .where('id', '=', environmentId)
        .execute();
    await set();
    await h.t.deps.environments.update(ctx, environmentId, {
      ...input,
      env_vars: { A: 'b' },
      metadata: { k: 1 },
    });
    assert.equal(await checkpointIdOf(environmentId), 'ckpt-1');
    for (const change of [
      { packages: { npm: 'cowsay' } },
      { repos: [{ url: 'https://example.com/a/b.git' }] },
      { setup_script: 'echo changed' },
      { setup_script: null },
    ]) {
      await set();
      await h.t.deps.environments.update(ctx, environmentId, { ...input, ...change });
      assert.equal(await checkpointIdOf(environmentId), null, JSON.stringify(change));
      const after = await h.t.deps.environments.get(ctx, environmentId);
      Object.assign(input, {
        packages: after.packages,
        repos: after.repos,
        setup_script: after.setup_script,
      });
    }
  });
});
