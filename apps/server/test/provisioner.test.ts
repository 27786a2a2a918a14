// The provisioner against a real sandboxd and the real database (issue 9, deliverable 3).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ProvisionError } from '../src/conversations/contracts.ts';
import { ENV_FILE_PATH } from '../src/conversations/env-file.ts';
import {
  createEnvironment,
  createVault,
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

describe('provisioner', () => {
  test('provisions: stages, env layers (vault wins), env file mode 600, skills, sandbox row ready', async () => {
    const environmentId = await createEnvironment(h, {
      env_vars: { PLAIN: 'plain-value', SHARED: 'from-env-vars' },
      secrets: { ENV_SECRET: 'env-secret-value-1234', SHARED: 'from-environment-secret' },
      setup_script: 'echo "setup sees $ENV_SECRET and $PLAIN"\necho done-setup > /home/sandbox/setup-ran',
    });
    const vaultId = await createVault(h, {
      SHARED: 'from-vault-secret-5678',
      VAULT_ONLY: 'vault-only-value-9',
    });
    const c = await newConversation(h, {
      environmentId,
      vaultId,
      skills: [{ name: 'greeter', content: '# Greeter\nSay hello.' }],
      mcpServers: {
        tool: { command: 'tool', args: ['--key', '${VAULT_ONLY}'], env: { T: '${ENV_SECRET}', L: '$$HOME' } },
      },
    });
    const p = provisionerFor(h);
    const result = await p.provision(c.input);
    assert.equal(result.path, 'cold');
    assert.deepEqual(stagesOf(c.writer.rows), [
      'provision:started',
      'provision:done',
      'setup:started',
      'setup:done',
    ]);
    for (const row of c.writer.rows.filter((r) => r.stage?.state === 'done'))
      assert.equal(typeof row.stage?.durationMs, 'number');
    assert.equal(result.env['SHARED'], 'from-vault-secret-5678');
    assert.equal(result.env['PLAIN'], 'plain-value');
    assert.equal(result.env['PADDOCK_BASE_URL'], 'http://paddock.internal:4000');
    assert.equal(result.env['SERVICE_BASE_URL'], 'http://paddock.internal:4000');
    assert.equal(result.env['PADDOCK_CONVERSATION_ID'], c.lease.conversationId);
    assert.match(result.env['PADDOCK_TOKEN'] ?? '', /^pdk_/);
    assert.equal(result.env['SERVICE_TOKEN'], result.env['PADDOCK_TOKEN']);
    assert.deepEqual(result.mcpServers['tool'], {
      command: 'tool',
      args: ['--key', 'vault-only-value-9'],
      env: { T: 'env-secret-value-1234', L: '$HOME' },
    });
    // Secrets and the callback key are redacted from the setup output; env_vars are not secret.
    const out = c.writer.text();
    assert.match(out, /setup sees \[REDACTED\] and plain-value/);
    assert.ok(!out.includes('env-secret-value-1234'));
    assert.equal(c.input.registry.redact(result.env['PADDOCK_TOKEN'] ?? '').toString(), '[REDACTED]');

    const name = c.input.sandboxName;
    assert.equal((await sh(h.client, name, `stat -c %a ${ENV_FILE_PATH}`)).trim(), '600');
    const sourced = await sh(
      h.client,
      name,
      `. ${ENV_FILE_PATH} && printf '%s|%s|%s' "$SHARED" "$PLAIN" "$PADDOCK_CONVERSATION_ID"`,
    );
    assert.equal(sourced, `from-vault-secret-5678|plain-value|${c.lease.conversationId}`);
    assert.equal(
      await sh(h.client, name, 'cat /home/sandbox/.test-runtime/skills/greeter/SKILL.md'),
      '# Greeter\nSay hello.',
    );
    assert.equal((await sh(h.client, name, 'cat /home/sandbox/setup-ran')).trim(), 'done-setup');

    const row = await sandboxRow(h, c.input.sandboxId);
    assert.equal(row.status, 'ready');
    assert.ok(row.ready_at);
    // The callback key is a live conversation key.
    const key = await h.t.deps.db
      .selectFrom('api_keys')
      .select(['scope', 'conversation_id', 'revoked_at', 'expires_at'])
      .where('id', '=', result.callbackKeyId)
      .executeTakeFirstOrThrow();
    assert.equal(key.scope, 'conversation');
    assert.equal(key.conversation_id, c.lease.conversationId);
    assert.equal(key.revoked_at, null);
    const days = ((key.expires_at?.getTime() ?? 0) - Date.now()) / 86_400_000;
    assert.ok(days > 29.9 && days <= 30, `expires in ${days} days`);
    await h.client.destroy(name);
  });

  test('the env file is inert: quotes, $, backticks, newlines and $(…) in values cannot execute', async () => {
    const nasty = {
      Q1: "it's \"quoted\" 'twice'",
      D1: '$HOME ${PATH} $(touch /home/sandbox/pwned1)',
      B1: '`touch /home/sandbox/pwned2` \\ backslash',
      N1: 'line one\nline two; touch /home/sandbox/pwned3\n',
      S1: "'; touch /home/sandbox/pwned4; echo '",
    };
    const environmentId = await createEnvironment(h, { secrets: nasty });
    const c = await newConversation(h, { environmentId });
    const result = await provisionerFor(h).provision(c.input);
    const name = c.input.sandboxName;
    for (const [key, value] of Object.entries(nasty)) {
      const got = await sh(h.client, name, `. ${ENV_FILE_PATH} && printf '%s' "$${key}"`);
      assert.equal(got, value, key);
    }
    assert.equal((await sh(h.client, name, 'ls /home/sandbox | grep -c pwned || true')).trim(), '0');
    assert.equal(result.env['D1'], nasty.D1);
    await h.client.destroy(name);
  });

  test('a missing ${VAR} in the MCP config fails `provision` naming the variables only; sandbox destroyed, row failed', async () => {
    const environmentId = await createEnvironment(h, { secrets: { PRESENT: 'present-secret-value' } });
    const c = await newConversation(h, {
      environmentId,
      mcpServers: { x: { command: 'x', args: ['${MISSING_B}', '${PRESENT}'], env: { A: '${MISSING_A}' } } },
    });
    await assert.rejects(provisionerFor(h).provision(c.input), (err: unknown) => {
      assert.ok(err instanceof ProvisionError);
      assert.equal(err.stage, 'provision');
      assert.match(err.message, /MISSING_A, MISSING_B/);
      assert.ok(!err.message.includes('present-secret-value'));
      return true;
    });
    assert.deepEqual(stagesOf(c.writer.rows), ['provision:started', 'provision:failed']);
    assert.equal(await h.client.get(c.input.sandboxName), null);
    const row = await sandboxRow(h, c.input.sandboxId);
    assert.equal(row.status, 'failed');
    assert.match(row.reason ?? '', /MISSING_A/);
    // The callback key minted before the failure is revoked.
    const live = await h.t.deps.db
      .selectFrom('api_keys')
      .select('id')
      .where('conversation_id', '=', c.lease.conversationId)
      .where('revoked_at', 'is', null)
      .execute();
    assert.equal(live.length, 0);
  });

  test('a failing setup script: output streamed and redacted, stage failed, sandbox destroyed, row failed with the reason', async () => {
    const environmentId = await createEnvironment(h, {
      secrets: { TOKEN_X: 'tok-abcdef-123456' },
      setup_script: 'echo "using $TOKEN_X"\necho "broken step" >&2\nexit 7\necho never',
    });
    const c = await newConversation(h, { environmentId });
    await assert.rejects(provisionerFor(h).provision(c.input), (err: unknown) => {
      assert.ok(err instanceof ProvisionError);
      assert.equal(err.stage, 'setup');
      assert.match(err.message, /exit 7/);
      return true;
    });
    assert.deepEqual(stagesOf(c.writer.rows), [
      'provision:started',
      'provision:done',
      'setup:started',
      'setup:failed',
    ]);
    const stdout = c.writer.rows
      .filter((r) => r.stream === 'stdout')
      .map((r) => r.text)
      .join('');
    const stderr = c.writer.rows
      .filter((r) => r.stream === 'stderr')
      .map((r) => r.text)
      .join('');
    assert.equal(stdout, 'using [REDACTED]\n');
    assert.equal(stderr, 'broken step\n');
    assert.equal(await h.client.get(c.input.sandboxName), null);
    const row = await sandboxRow(h, c.input.sandboxId);
    assert.equal(row.status, 'failed');
    assert.match(row.reason ?? '', /^setup: the setup script failed \(exit 7\)/);
  });

  test('the setup script times out on the client side', async () => {
    const environmentId = await createEnvironment(h, { setup_script: 'sleep 30' });
    const c = await newConversation(h, { environmentId });
    await assert.rejects(provisionerFor(h, { timeouts: { setupMs: 1000 } }).provision(c.input), /within 1 s/);
    assert.equal(await h.client.get(c.input.sandboxName), null);
  });

  test('adopts an existing backend sandbox of the same name (409)', async () => {
    const c = await newConversation(h);
    await h.client.create(c.input.sandboxName);
    await h.client.writeFile(c.input.sandboxName, '/home/sandbox/before', 'x');
    await provisionerFor(h).provision(c.input);
    assert.equal(await sh(h.client, c.input.sandboxName, 'cat /home/sandbox/before'), 'x');
    await h.client.destroy(c.input.sandboxName);
  });

  test('a stale owner (epoch moved on) changes no row', async () => {
    const c = await newConversation(h);
    await h.t.deps.db
      .updateTable('conversations')
      .set({ owner_epoch: 2 })
      .where('id', '=', c.lease.conversationId)
      .execute();
    await assert.rejects(provisionerFor(h).provision(c.input), { name: 'StaleOwnerError' });
    assert.equal((await sandboxRow(h, c.input.sandboxId)).status, 'pending');
    assert.equal(await h.client.get(c.input.sandboxName), null);
  });

  test('cancelling while provisioning marks the stage interrupted and destroys the sandbox', async () => {
    const environmentId = await createEnvironment(h, { setup_script: 'echo started; sleep 30' });
    const c = await newConversation(h, { environmentId });
    const p = provisionerFor(h).provision(c.input);
    while (!c.writer.rows.some((r) => r.stage?.stage === 'setup'))
      await new Promise((r) => setTimeout(r, 50));
    c.controller.abort();
    await assert.rejects(p, /cancelled/);
    assert.deepEqual(stagesOf(c.writer.rows).slice(-1), ['setup:interrupted']);
    assert.equal(await h.client.get(c.input.sandboxName), null);
  });

  test('refreshEnv mints a fresh callback key (the old one revoked) and rewrites the env file', async () => {
    const environmentId = await createEnvironment(h, { secrets: { ROTATING: 'first-value-abcdef' } });
    const c = await newConversation(h, { environmentId });
    const p = provisionerFor(h);
    const first = await p.provision(c.input);
    const ctx = { tenantId: h.user.id, actor: { kind: 'system' as const }, ip: null };
    await h.t.deps.environments.secrets.upsert(ctx, environmentId, 'ROTATING', 'second-value-ghijkl');
    const second = await p.refreshEnv(c.input);
    assert.notEqual(second.callbackKeyId, first.callbackKeyId);
    const keys = await h.t.deps.db
      .selectFrom('api_keys')
      .select(['id', 'revoked_at'])
      .where('conversation_id', '=', c.lease.conversationId)
      .execute();
    assert.ok(keys.find((k) => k.id === first.callbackKeyId)?.revoked_at);
    assert.equal(keys.find((k) => k.id === second.callbackKeyId)?.revoked_at, null);
    const got = await sh(
      h.client,
      c.input.sandboxName,
      `. ${ENV_FILE_PATH} && printf '%s %s' "$ROTATING" "$PADDOCK_TOKEN"`,
    );
    assert.equal(got, `second-value-ghijkl ${second.env['PADDOCK_TOKEN']}`);
    await h.client.destroy(c.input.sandboxName);
  });
});
