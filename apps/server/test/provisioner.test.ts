// The provisioner against a real sandboxd and the real database (issue 9, deliverable 3).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { ProvisionError } from '../src/conversations/contracts.ts';
import { ENV_FILE_PATH } from '../src/conversations/provisioning/env-file.ts';
import { DEFAULT_STAGE_TIMEOUTS } from '../src/conversations/provisioning/provisioner.ts';
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
  testAdapter,
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
      .where('id', '=', result.callback.id)
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

  test('secrets of 64 KiB reach the setup script, the env file and every exec (the backend takes large envs)', async () => {
    const big = {
      BIG_A: 'a'.repeat(64 * 1024),
      BIG_B: `${'b'.repeat(64 * 1024 - 6)}'\n$x é`,
      BIG_C: 'c'.repeat(64 * 1024),
    };
    const environmentId = await createEnvironment(h, {
      secrets: big,
      setup_script: 'echo "setup sees ${#BIG_A} ${#BIG_C}"',
    });
    const c = await newConversation(h, { environmentId });
    const result = await provisionerFor(h).provision(c.input);
    assert.match(c.writer.text(), /setup sees 65536 65536/);
    const name = c.input.sandboxName;
    const got = await sh(h.client, name, 'printf %s "$BIG_B"', result.env);
    assert.equal(got, big.BIG_B);
    assert.equal(await sh(h.client, name, `. ${ENV_FILE_PATH} && printf '%s' "$BIG_B"`), big.BIG_B);
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

  test('an environment over 1 MiB of variables and secrets fails `provision` with the sizes, before any process; no value shown', async () => {
    const envVars: Record<string, string> = {};
    for (let i = 0; i < 20; i++) envVars[`LARGE_${i}`] = 'x'.repeat(30 * 1024);
    const secrets: Record<string, string> = {};
    for (let i = 0; i < 10; i++) secrets[`BIG_SECRET_${i}`] = `secret-${i}-${'y'.repeat(50 * 1024)}`;
    const environmentId = await createEnvironment(h, { env_vars: envVars, secrets });
    const c = await newConversation(h, { environmentId });
    await assert.rejects(provisionerFor(h).provision(c.input), (err: unknown) => {
      assert.ok(err instanceof ProvisionError);
      assert.equal(err.stage, 'provision');
      assert.match(err.message, /take 1\d{3} KiB together; a sandbox process can be given at most 1024 KiB/);
      assert.ok(!err.message.includes('yyyy') && !err.message.includes('xxxx'));
      return true;
    });
    assert.deepEqual(stagesOf(c.writer.rows), ['provision:started', 'provision:failed']);
    assert.equal(await h.client.get(c.input.sandboxName), null);
    assert.equal((await sandboxRow(h, c.input.sandboxId)).status, 'failed');
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
    // Spec, Sandbox interface rule 2: the defaults are 30–120 s for the setup script, 600 s for a clone.
    assert.ok(DEFAULT_STAGE_TIMEOUTS.setupMs >= 30_000 && DEFAULT_STAGE_TIMEOUTS.setupMs <= 120_000);
    assert.equal(DEFAULT_STAGE_TIMEOUTS.cloneMs, 600_000);
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

  test('fenced off mid-way (another process took over): no row written, the sandbox and key left to the new owner', async () => {
    const environmentId = await createEnvironment(h, { setup_script: 'sleep 1' });
    const c = await newConversation(h, { environmentId });
    const p = provisionerFor(h).provision(c.input);
    while (!c.writer.rows.some((r) => r.stage?.stage === 'setup'))
      await new Promise((r) => setTimeout(r, 50));
    await h.t.deps.db
      .updateTable('conversations')
      .set({ owner_epoch: 2 })
      .where('id', '=', c.lease.conversationId)
      .execute();
    await assert.rejects(p, { name: 'StaleOwnerError' });
    assert.equal((await sandboxRow(h, c.input.sandboxId)).status, 'starting');
    assert.ok(await h.client.get(c.input.sandboxName), 'the sandbox is not destroyed by a stale owner');
    const live = await h.t.deps.db
      .selectFrom('api_keys')
      .select('id')
      .where('conversation_id', '=', c.lease.conversationId)
      .where('revoked_at', 'is', null)
      .execute();
    assert.equal(live.length, 1);
    await h.client.destroy(c.input.sandboxName);
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
    assert.notEqual(second.callback.id, first.callback.id);
    const keys = await h.t.deps.db
      .selectFrom('api_keys')
      .select(['id', 'revoked_at'])
      .where('conversation_id', '=', c.lease.conversationId)
      .execute();
    assert.ok(keys.find((k) => k.id === first.callback.id)?.revoked_at);
    assert.equal(keys.find((k) => k.id === second.callback.id)?.revoked_at, null);
    const got = await sh(
      h.client,
      c.input.sandboxName,
      `. ${ENV_FILE_PATH} && printf '%s %s' "$ROTATING" "$PADDOCK_TOKEN"`,
    );
    assert.equal(got, `second-value-ghijkl ${second.env['PADDOCK_TOKEN']}`);
    await h.client.destroy(c.input.sandboxName);
  });

  test('network (spec rule 6): limited with hosts → allow rules only; limited without hosts → one * deny; unrestricted → no call', async () => {
    const policyOf = async (name: string) => {
      const res = await fetch(`${h.sandboxd.url}/v1/sandboxes/${name}/policy/network`, {
        headers: { authorization: `Bearer ${h.sandboxd.token}` },
      });
      assert.equal(res.status, 200);
      return ((await res.json()) as { rules: unknown[] }).rules;
    };
    const cases = [
      {
        env: {
          networking_type: 'limited' as const,
          networking_config: { allowed_hosts: ['api.github.com', '*.npmjs.org'] },
        },
        rules: [
          { domain: 'api.github.com', action: 'allow' },
          { domain: '*.npmjs.org', action: 'allow' },
        ],
        stages: ['provision:started', 'provision:done', 'network:started', 'network:done'],
      },
      {
        env: { networking_type: 'limited' as const, networking_config: { allowed_hosts: [] } },
        rules: [{ domain: '*', action: 'deny' }],
        stages: ['provision:started', 'provision:done', 'network:started', 'network:done'],
      },
      {
        env: {
          networking_type: 'unrestricted' as const,
          networking_config: { allowed_hosts: ['ignored.example.com'] },
        },
        rules: [],
        stages: ['provision:started', 'provision:done'],
      },
    ];
    for (const k of cases) {
      const environmentId = await createEnvironment(h, k.env);
      // An agent whose runtime needs no inference provider host (opencode with a model of
      // another provider): the environment's list is the whole list. Provider hosts:
      // inference-credentials.provision.test.ts.
      const c = await newConversation(h, { environmentId, runtime: 'opencode', model: 'ollama/llama3' });
      await provisionerFor(h).provision(c.input);
      assert.deepEqual(stagesOf(c.writer.rows), k.stages);
      assert.deepEqual(await policyOf(c.input.sandboxName), k.rules);
      await h.client.destroy(c.input.sandboxName);
    }
  });

  test('session state: saved from one sandbox, restored into another, files equal; the stored ciphertext has no plaintext', async () => {
    const a = await newConversation(h);
    const p = provisionerFor(h);
    const provisioned = await p.provision(a.input);
    const marker = 'session-marker-7c1e0f2a-plaintext-that-must-not-appear';
    await sh(
      h.client,
      a.input.sandboxName,
      `mkdir -p ~/.test-runtime/sessions/deep && printf '%s' '${marker}' > ~/.test-runtime/sessions/deep/s.jsonl && head -c 20000 /dev/urandom > ~/.test-runtime/sessions/blob && chmod 600 ~/.test-runtime/sessions/blob`,
    );
    const sum = (name: string) =>
      sh(
        h.client,
        name,
        'cd ~/.test-runtime/sessions && find . -type f | sort | xargs sha256sum && stat -c %a blob',
      );
    const before = await sum(a.input.sandboxName);
    const save = {
      lease: a.lease,
      sandboxName: a.input.sandboxName,
      adapter: a.input.adapter,
      env: provisioned.env,
    };
    await p.saveSession(save);
    const stored = await h.t.deps.db
      .selectFrom('conversations')
      .select(['session_state', 'session_state_at'])
      .where('id', '=', a.lease.conversationId)
      .executeTakeFirstOrThrow();
    assert.ok(stored.session_state && stored.session_state.length > 0);
    assert.ok(stored.session_state_at);
    assert.ok(!stored.session_state.includes(Buffer.from(marker)));
    assert.ok(!stored.session_state.includes(Buffer.from('s.jsonl')));
    // Sealed, not merely compressed: the tenant key opens it to the tar.gz that holds the marker.
    assert.notEqual(stored.session_state.subarray(0, 2).toString('hex'), '1f8b');
    const opened = await h.t.deps.secrets.openBlob(
      { tenantId: a.lease.tenantId, conversationId: a.lease.conversationId, purpose: 'session-state' },
      stored.session_state,
    );
    assert.ok(gunzipSync(opened).includes(Buffer.from(marker)));
    await h.client.destroy(a.input.sandboxName);

    // A new sandbox of the same conversation (the old one was reclaimed).
    const name2 = `${a.input.sandboxName.slice(0, -8)}${'0'.repeat(8)}`;
    await h.client.create(name2);
    assert.equal(await p.restoreSession({ ...save, sandboxName: name2 }), true);
    assert.equal(await sum(name2), before);
    await h.client.destroy(name2);

    // Another conversation cannot open it (bound to its conversation), and has nothing of its own.
    const b = await newConversation(h);
    assert.equal(await p.restoreSession({ ...save, lease: b.lease, sandboxName: name2 }), false);
    await h.t.deps.db
      .updateTable('conversations')
      .set({ session_state: stored.session_state })
      .where('id', '=', b.lease.conversationId)
      .execute();
    await assert.rejects(p.restoreSession({ ...save, lease: b.lease, sandboxName: name2 }), {
      name: 'DecryptionError',
    });
  });

  test('session state over the size cap is not saved and says why', async () => {
    const { createSessionStateStore } = await import('../src/conversations/provisioning/session-state.ts');
    const c = await newConversation(h);
    await provisionerFor(h).provision(c.input);
    await sh(
      h.client,
      c.input.sandboxName,
      'mkdir -p ~/.test-runtime/sessions && head -c 300000 /dev/urandom > ~/.test-runtime/sessions/big',
    );
    const store = createSessionStateStore({
      db: h.t.deps.db,
      sandbox: h.client,
      secrets: h.t.deps.secrets,
      maxBytes: 100_000,
    });
    await assert.rejects(
      store.save({
        lease: c.lease,
        sandboxName: c.input.sandboxName,
        sessionPaths: testAdapter.sessionPaths,
      }),
      /larger than .* and was not saved/,
    );
    const row = await h.t.deps.db
      .selectFrom('conversations')
      .select('session_state')
      .where('id', '=', c.lease.conversationId)
      .executeTakeFirstOrThrow();
    assert.equal(row.session_state, null);
    await h.client.destroy(c.input.sandboxName);
  });
});
