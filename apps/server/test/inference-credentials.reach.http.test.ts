// A gateway base URL no sandbox can reach is refused when it is set (issue 37, finding 1): a
// loopback or private address that no service route (SANDBOXD_SERVICE_ROUTES) or opened range
// (SANDBOXD_EGRESS_ALLOW_CIDRS) of the operator covers. The refusal says what the operator
// declares; nothing is stored or audited. The real app and database, the operator's settings as
// the server reads them at boot.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';

let t: TestApp;
before(async () => {
  t = await buildTestApp({
    env: {
      SANDBOXD_SERVICE_ROUTES: 'gateway.internal=127.0.0.1:4555, lan-gw.internal=10.20.0.7:8000',
      SANDBOXD_EGRESS_ALLOW_CIDRS: '10.30.0.0/16',
    },
  });
});
after(async () => {
  await t.close();
});

const PATH = '/api/account/inference-credentials';
const KEY = 'sk-ant-reach-check-key-Lp4Xw9';

function put(user: TestUser, base_url: string) {
  return t.app.inject({
    method: 'PUT',
    url: `${PATH}/anthropic`,
    headers: user.auth,
    payload: { api_key: KEY, base_url },
  });
}

/** The one message on base_url of a 422, after checking nothing was stored or audited. */
async function refusal(user: TestUser, base_url: string): Promise<string> {
  const res = await put(user, base_url);
  assert.equal(res.statusCode, 422, `${base_url}: ${res.body}`);
  assert.equal(res.json().error, 'validation_failed');
  const messages: string[] = res.json().errors?.base_url ?? [];
  assert.equal(messages.length, 1, res.body);
  assert.ok(!res.body.includes(KEY));
  const listed = await t.app.inject({ method: 'GET', url: PATH, headers: user.auth });
  assert.equal(listed.json().data[0].set, false);
  const audited = await t.deps.db
    .selectFrom('audit_events')
    .select('type')
    .where('tenant_id', '=', user.id)
    .where('type', 'like', 'inference_credential.%')
    .execute();
  assert.deepEqual(audited, []);
  return messages[0] ?? '';
}

describe('a gateway base URL no sandbox can reach', () => {
  it('loopback (an address, localhost, ::1) is refused, naming the service route to declare and the URL to use', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const v4 = await refusal(user, 'http://127.0.0.1:4600/v1');
    assert.match(v4, /no sandbox can reach 127\.0\.0\.1: it is this machine/);
    assert.match(v4, /SANDBOXD_SERVICE_ROUTES=gateway\.internal=127\.0\.0\.1:4600/);
    assert.match(v4, /http:\/\/gateway\.internal:4600\/v1/);
    assert.match(
      await refusal(user, 'http://localhost:11434'),
      /SANDBOXD_SERVICE_ROUTES=gateway\.internal=127\.0\.0\.1:11434/,
    );
    assert.match(
      await refusal(user, 'http://[::1]:8080'),
      /SANDBOXD_SERVICE_ROUTES=gateway\.internal=\[::1\]:8080/,
    );
    // The address of a declared route, written as an address, is not the route (routes go by
    // name): refused, naming the route to use instead.
    assert.equal(
      await refusal(user, 'http://127.0.0.1:4555'),
      'no sandbox can reach 127.0.0.1 directly; the operator routes gateway.internal to it: use http://gateway.internal:4555',
    );
  });

  it('a private address outside the opened ranges is refused, naming SANDBOXD_EGRESS_ALLOW_CIDRS', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const lan = await refusal(user, 'http://192.168.1.20:11434');
    assert.match(
      lan,
      /no sandbox can reach 192\.168\.1\.20: it is a private address the operator has not opened/,
    );
    assert.match(lan, /SANDBOXD_EGRESS_ALLOW_CIDRS \(e\.g\. 192\.168\.1\.20\/32\)/);
    assert.match(lan, /SANDBOXD_SERVICE_ROUTES=gateway\.internal=192\.168\.1\.20:11434/);
    assert.match(await refusal(user, 'https://10.20.0.7:8001'), /SANDBOXD_EGRESS_ALLOW_CIDRS/);
    assert.match(
      await refusal(user, 'https://10.20.0.7:8000'),
      /the operator routes lan-gw\.internal to it: use https:\/\/lan-gw\.internal:8000$/,
    );
    assert.match(await refusal(user, 'http://[fd12::7]:4000'), /fd12::7\/128/);
  });

  it("a declared route's name on another port is refused, naming the route's port", async () => {
    const user = await createVerifiedUser(t.deps.db);
    assert.equal(
      await refusal(user, 'http://gateway.internal:4556/anthropic'),
      'the service route gateway.internal is declared for port 4555 only: use http://gateway.internal:4555',
    );
    assert.match(await refusal(user, 'http://gateway.internal'), /declared for port 4555 only/);
  });

  it('what the operator declared, and the public internet, are accepted', async () => {
    const user = await createVerifiedUser(t.deps.db);
    for (const base_url of [
      'http://gateway.internal:4555/anthropic',
      'http://lan-gw.internal:8000',
      'http://10.30.4.5:8080',
      'https://api.anthropic.com',
      'https://8.8.8.8/v1',
      // A name that does not resolve here may resolve where sandboxd runs.
      'http://llm.test:8080',
    ]) {
      const res = await put(user, base_url);
      assert.equal(res.statusCode, 200, `${base_url}: ${res.body}`);
      assert.equal(res.json().base_url, base_url);
    }
  });
});

describe('with nothing declared', () => {
  it('every loopback and private address is refused: a tenant cannot open one', async () => {
    const bare = await buildTestApp();
    try {
      const user = await createVerifiedUser(bare.deps.db);
      for (const base_url of ['http://127.0.0.1:4555', 'http://10.30.4.5:8080', 'http://[fd12::7]:4000']) {
        const res = await bare.app.inject({
          method: 'PUT',
          url: `${PATH}/anthropic`,
          headers: user.auth,
          payload: { api_key: KEY, base_url },
        });
        assert.equal(res.statusCode, 422, `${base_url}: ${res.body}`);
      }
    } finally {
      await bare.close();
    }
  });
});
