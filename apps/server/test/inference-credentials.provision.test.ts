// The account's inference credentials in the sandbox (issue 10, item 4), through the real
// provisioner, a real sandboxd and a gateway in a test network the sandbox reaches only
// through its egress proxy: injected under the variables each runtime reads, overridden by
// environment/vault secrets of the same name, registered with the redactor, refreshed on
// reattach, and the provider host allowed in a `limited` environment.
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { createTestNet, type TestNet } from '../../sandboxd/test/netns.ts';
import { ENV_FILE_PATH } from '../src/conversations/provisioning/env-file.ts';
import { createVerifiedUser } from './helpers/factories.ts';
import {
  createEnvironment,
  createVault,
  newConversation,
  type ProvisionHarness,
  provisionerFor,
  sh,
  stagesOf,
  startProvisionHarness,
} from './helpers/provisioning.ts';

let tnet: TestNet;
let h: ProvisionHarness;
let gateway: http.Server;
let gatewayPort = 0;
/** What the gateway saw: the API key header per request. */
const seen: { host: string | undefined; key: string | undefined }[] = [];

const ANTHROPIC_KEY = 'sk-ant-account-key-7Hq2Lm9Zx';
const OPENAI_KEY = 'sk-proj-account-openai-4Rt8';

before(async () => {
  tnet = await createTestNet();
  h = await startProvisionHarness({
    sandboxd: {
      net: tnet,
      hosts: { 'llm-gateway.test': tnet.ip, 'elsewhere.test': tnet.ip },
      env: { SANDBOXD_EGRESS_ALLOW_CIDRS: tnet.allowEnv },
    },
  });
  gateway = http.createServer((req, res) => {
    seen.push({ host: req.headers.host, key: req.headers['x-api-key'] as string | undefined });
    res.end('gateway-ok');
  });
  const listener = await tnet.listen();
  listener.server.on('connection', (s) => gateway.emit('connection', s));
  gatewayPort = listener.port;
});
after(async () => {
  gateway?.closeAllConnections();
  await h?.close();
  tnet?.close();
});

async function setCredential(userAuth: { authorization: string }, provider: string, body: object) {
  const res = await h.t.app.inject({
    method: 'PUT',
    url: `/api/account/inference-credentials/${provider}`,
    headers: userAuth,
    payload: body,
  });
  assert.equal(res.statusCode, 200, res.body);
}

async function policyOf(name: string): Promise<unknown[]> {
  const res = await fetch(`${h.sandboxd.url}/v1/sandboxes/${name}/policy/network`, {
    headers: { authorization: `Bearer ${h.sandboxd.token}` },
  });
  assert.equal(res.status, 200);
  return ((await res.json()) as { rules: unknown[] }).rules;
}

describe('inference credentials in the sandbox', () => {
  test("injects the owner's keys and base URLs under the runtimes' variables, registered with the redactor; other accounts get none", async () => {
    await setCredential(h.user.auth, 'anthropic', {
      api_key: ANTHROPIC_KEY,
      base_url: 'https://llm-gateway.example.com/anthropic',
    });
    await setCredential(h.user.auth, 'openai', { api_key: OPENAI_KEY });
    const c = await newConversation(h);
    const result = await provisionerFor(h).provision(c.input);
    assert.equal(result.env['ANTHROPIC_API_KEY'], ANTHROPIC_KEY);
    assert.equal(result.env['ANTHROPIC_BASE_URL'], 'https://llm-gateway.example.com/anthropic');
    assert.equal(result.env['OPENAI_API_KEY'], OPENAI_KEY);
    assert.equal(result.env['OPENAI_BASE_URL'], undefined);
    assert.equal(result.env['GEMINI_API_KEY'], undefined);
    assert.equal(result.env['GOOGLE_GEMINI_BASE_URL'], undefined);
    // The env file (mode 600) carries them; the redactor knows the keys (not the base URL).
    const sourced = await sh(
      h.client,
      c.input.sandboxName,
      `. ${ENV_FILE_PATH} && printf '%s|%s|%s' "$ANTHROPIC_API_KEY" "$ANTHROPIC_BASE_URL" "$OPENAI_API_KEY"`,
    );
    assert.equal(sourced, `${ANTHROPIC_KEY}|https://llm-gateway.example.com/anthropic|${OPENAI_KEY}`);
    assert.equal(
      c.input.registry.redact(`a ${ANTHROPIC_KEY} b ${OPENAI_KEY}`).toString(),
      'a [REDACTED] b [REDACTED]',
    );
    assert.equal(
      c.input.registry.redact('https://llm-gateway.example.com/anthropic').toString(),
      'https://llm-gateway.example.com/anthropic',
    );
    await h.client.destroy(c.input.sandboxName);

    // Another account on the same server: nothing of the first one's.
    const other = await createVerifiedUser(h.t.deps.db);
    const o = await newConversation({ ...h, user: other });
    const otherEnv = (await provisionerFor(h).provision(o.input)).env;
    for (const name of ['ANTHROPIC_API_KEY', 'ANTHROPIC_BASE_URL', 'OPENAI_API_KEY'])
      assert.equal(otherEnv[name], undefined, name);
    assert.ok(!JSON.stringify(otherEnv).includes(ANTHROPIC_KEY));
    await h.client.destroy(o.input.sandboxName);
  });

  test('environment, then vault variables of the same name override; a key from them takes the account base URL out', async () => {
    const user = await createVerifiedUser(h.t.deps.db);
    const hu = { ...h, user };
    await setCredential(user.auth, 'anthropic', {
      api_key: 'sk-ant-overridden-by-vault-1',
      base_url: 'https://account-gw.example.com',
    });
    await setCredential(user.auth, 'openai', { api_key: 'sk-openai-overridden-by-env-2' });
    await setCredential(user.auth, 'gemini', {
      api_key: 'AIza-gemini-kept-key-3',
      base_url: 'https://gemini-gw.example.com',
    });
    const environmentId = await createEnvironment(hu, {
      env_vars: { GOOGLE_GEMINI_BASE_URL: 'https://env-gemini-gw.example.com' },
      secrets: { OPENAI_API_KEY: 'sk-env-openai-key-Ab12', ANTHROPIC_API_KEY: 'sk-ant-env-key-Cd34' },
    });
    const vaultId = await createVault(hu, { ANTHROPIC_API_KEY: 'sk-ant-vault-key-Ef56' });
    const c = await newConversation(hu, { environmentId, vaultId });
    const env = (await provisionerFor(h).provision(c.input)).env;
    assert.equal(env['ANTHROPIC_API_KEY'], 'sk-ant-vault-key-Ef56');
    // The vault's key is not sent to the gateway configured for the account's own key.
    assert.equal(env['ANTHROPIC_BASE_URL'], undefined);
    assert.equal(env['OPENAI_API_KEY'], 'sk-env-openai-key-Ab12');
    // Only the base URL overridden (env_vars): the account's key goes there.
    assert.equal(env['GEMINI_API_KEY'], 'AIza-gemini-kept-key-3');
    assert.equal(env['GOOGLE_GEMINI_BASE_URL'], 'https://env-gemini-gw.example.com');
    // Overridden account keys are still redacted (they are the account's secrets all the same).
    assert.equal(c.input.registry.redact('sk-ant-overridden-by-vault-1').toString(), '[REDACTED]');
    await h.client.destroy(c.input.sandboxName);
  });

  test('reattach (refreshEnv) decrypts the current credentials again and rewrites the env file', async () => {
    const user = await createVerifiedUser(h.t.deps.db);
    const hu = { ...h, user };
    await setCredential(user.auth, 'anthropic', { api_key: 'sk-ant-first-key-before-reattach' });
    const c = await newConversation(hu);
    const p = provisionerFor(h);
    await p.provision(c.input);
    await setCredential(user.auth, 'anthropic', { api_key: 'sk-ant-second-key-after-reattach' });
    const refreshed = await p.refreshEnv(c.input);
    assert.equal(refreshed.env['ANTHROPIC_API_KEY'], 'sk-ant-second-key-after-reattach');
    assert.equal(c.input.registry.redact('sk-ant-second-key-after-reattach').toString(), '[REDACTED]');
    assert.equal(
      await sh(h.client, c.input.sandboxName, `. ${ENV_FILE_PATH} && printf '%s' "$ANTHROPIC_API_KEY"`),
      'sk-ant-second-key-after-reattach',
    );
    await h.client.destroy(c.input.sandboxName);
  });

  test("a limited environment allows the runtime's provider host: the default API host, or the base URL's host", async () => {
    const user = await createVerifiedUser(h.t.deps.db);
    const hu = { ...h, user };
    const environmentId = await createEnvironment(hu, {
      networking_type: 'limited',
      networking_config: { allowed_hosts: [] },
    });
    // No base URL: the provider's API host (claude → Anthropic), nothing for the other providers.
    await setCredential(user.auth, 'openai', { api_key: 'sk-openai-not-for-claude-9' });
    const plain = await newConversation(hu, { environmentId });
    await provisionerFor(h).provision(plain.input);
    assert.deepEqual(stagesOf(plain.writer.rows), [
      'provision:started',
      'provision:done',
      'network:started',
      'network:done',
    ]);
    assert.deepEqual(await policyOf(plain.input.sandboxName), [
      { domain: 'api.anthropic.com', action: 'allow' },
    ]);
    await h.client.destroy(plain.input.sandboxName);

    // A gateway base URL: its host is allowed and reachable with the key; nothing else is.
    const key = 'sk-ant-through-the-gateway-5Kp';
    await setCredential(user.auth, 'anthropic', {
      api_key: key,
      base_url: `http://llm-gateway.test:${gatewayPort}/anthropic`,
    });
    const c = await newConversation(hu, { environmentId });
    await provisionerFor(h).provision(c.input);
    assert.deepEqual(await policyOf(c.input.sandboxName), [{ domain: 'llm-gateway.test', action: 'allow' }]);
    const curl = (url: string) =>
      sh(
        h.client,
        c.input.sandboxName,
        `. ${ENV_FILE_PATH} && curl -sS -m 10 -H "x-api-key: $ANTHROPIC_API_KEY" -w ' %{http_code}' "${url}"; echo " rc=$?"`,
      );
    seen.length = 0;
    assert.match(await curl('$ANTHROPIC_BASE_URL/v1/messages'), /gateway-ok 200 rc=0/);
    assert.deepEqual(seen, [{ host: `llm-gateway.test:${gatewayPort}`, key }]);
    assert.match(await curl(`http://elsewhere.test:${gatewayPort}/`), / 403 rc=0/);
    assert.equal(seen.length, 1, 'the denied host was reached');
    await h.client.destroy(c.input.sandboxName);
  });
});
