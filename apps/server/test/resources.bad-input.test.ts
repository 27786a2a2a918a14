// Generated bad input for every body and query of environments, vaults, agents, secrets and
// apply: every field (found by walking a valid sample, nested entries included) is replaced
// by wrong types, out-of-range and unknown shapes. Each answer must be a 4xx (or a 2xx where
// the value happens to be valid), never a 5xx. Random JSON bodies (fast-check) likewise.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import fc from 'fast-check';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';

let t: TestApp;
let user: TestUser;
const ids = { env: '', vault: '', agent: '' };

before(async () => {
  t = await buildTestApp();
  user = await createVerifiedUser(t.deps.db);
  const post = async (url: string, payload: object) =>
    (await t.app.inject({ method: 'POST', url, headers: user.auth, payload })).json() as { id: string };
  ids.env = (await post('/api/environments', { name: 'fuzz-env' })).id;
  ids.vault = (await post('/api/vaults', { name: 'fuzz-vault' })).id;
  ids.agent = (await post('/api/agents', { name: 'fuzz-agent', model: 'x/y', runtime: 'claude' })).id;
});
after(async () => {
  await t.close();
});

const BAD_VALUES: unknown[] = [
  null,
  0,
  -1,
  1.5,
  1e308,
  Number.MAX_SAFE_INTEGER + 2,
  true,
  '',
  ' ',
  '\u0000',
  'x'.repeat(70_000),
  '../../etc/passwd',
  '${A}',
  '😀',
  '\ud800',
  [],
  [null],
  ['\u0000'],
  {},
  { '\u0000': 1 },
  { nested: { deeper: { deepest: [1, { a: '\u0000' }] } } },
  JSON.parse('{"__proto__": {"polluted": true}}'),
];

type Path = Array<string | number>;

/** Every path in a JSON value (objects and arrays, not the root). */
function paths(value: unknown, prefix: Path = []): Path[] {
  const out: Path[] = [];
  if (Array.isArray(value)) {
    value.forEach((v, i) => {
      out.push([...prefix, i], ...paths(v, [...prefix, i]));
    });
  } else if (value && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) out.push([...prefix, k], ...paths(v, [...prefix, k]));
  }
  return out;
}

function setAt(value: unknown, path: Path, replacement: unknown): unknown {
  const copy = structuredClone(value) as Record<string | number, unknown>;
  let cursor: Record<string | number, unknown> = copy;
  for (const key of path.slice(0, -1)) cursor = cursor[key] as Record<string | number, unknown>;
  cursor[path.at(-1)!] = replacement;
  return copy;
}

const ENV_SAMPLE = {
  name: 'sample',
  env_vars: { NODE_ENV: 'x' },
  packages: { apt: 'jq', npm: 'typescript@5', pip: 'requests' },
  repos: [{ url: 'https://github.com/a/b.git', ref: 'main', token_secret: 'GITHUB_TOKEN' }],
  setup_script: 'echo hi',
  networking_type: 'limited',
  networking_config: { allowed_hosts: ['github.com'] },
  metadata: { a: 1 },
};
const VAULT_SAMPLE = { name: 'sample', metadata: { a: 1 } };
const AGENT_SAMPLE = {
  name: 'sample',
  model: 'anthropic/claude',
  runtime: 'claude',
  environment_id: null as string | null,
  vault_ids: [] as string[],
  system: 's',
  description: 'd',
  skills: [
    { name: 'inline', content: '# skill' },
    { source: 'acme/skills', ref: 'v1' },
  ],
  mcp_servers: { gh: { command: 'npx', args: ['-y'], env: { TOKEN: '${T}' } } },
  metadata: { a: 1 },
};
const SECRET_SAMPLE = { key: 'TOKEN', value: 'v' };
const APPLY_SAMPLE = {
  resources: [
    { kind: 'Environment', name: 'e', spec: { ...ENV_SAMPLE, name: undefined, secrets: { TOKEN: 'v' } } },
    { kind: 'Vault', name: 'v', spec: { metadata: { a: 1 }, secrets: { TOKEN: 'v' } } },
    {
      kind: 'Agent',
      name: 'a',
      spec: {
        ...AGENT_SAMPLE,
        name: undefined,
        environment_id: undefined,
        vault_ids: undefined,
        environment: 'e',
        vaults: ['v'],
      },
    },
  ],
};

function targets(): Array<{ method: 'POST' | 'PUT'; url: string; sample: unknown }> {
  const agentSample = { ...AGENT_SAMPLE, environment_id: ids.env, vault_ids: [ids.vault] };
  return [
    { method: 'POST', url: '/api/environments', sample: ENV_SAMPLE },
    { method: 'PUT', url: `/api/environments/${ids.env}`, sample: { ...ENV_SAMPLE, name: 'fuzz-env' } },
    { method: 'POST', url: '/api/vaults', sample: VAULT_SAMPLE },
    { method: 'PUT', url: `/api/vaults/${ids.vault}`, sample: { ...VAULT_SAMPLE, name: 'fuzz-vault' } },
    { method: 'POST', url: '/api/agents', sample: agentSample },
    { method: 'PUT', url: `/api/agents/${ids.agent}`, sample: { ...agentSample, name: 'fuzz-agent' } },
    { method: 'POST', url: `/api/environments/${ids.env}/secrets`, sample: SECRET_SAMPLE },
    { method: 'POST', url: `/api/vaults/${ids.vault}/secrets`, sample: SECRET_SAMPLE },
    { method: 'POST', url: '/api/apply', sample: JSON.parse(JSON.stringify(APPLY_SAMPLE)) },
  ];
}

async function send(method: 'POST' | 'PUT' | 'GET', url: string, payload?: unknown, raw = false) {
  if (payload === undefined) return await t.app.inject({ method, url, headers: user.auth });
  return await t.app.inject({
    method,
    url,
    headers: { ...user.auth, 'content-type': 'application/json' },
    payload: raw ? (payload as string) : JSON.stringify(payload),
  });
}

function assertNo5xx(res: { statusCode: number; body: string }, what: string) {
  assert.ok(res.statusCode < 500, `${what} → ${res.statusCode} ${res.body.slice(0, 300)}`);
  if (res.statusCode >= 400) {
    const body = JSON.parse(res.body) as { error?: unknown; message?: unknown };
    assert.equal(typeof body.error, 'string', what);
    assert.equal(typeof body.message, 'string', what);
    assert.ok(!/at .*\.ts:\d+/.test(res.body), `${what}: stack trace in body`);
  }
}

describe('generated bad input', () => {
  it('answers every mutated field of every body with 2xx or 4xx, never 5xx', async () => {
    let count = 0;
    let refused = 0;
    for (const target of targets()) {
      // The sample itself is accepted (or at least not a 5xx).
      assertNo5xx(
        await send(target.method, target.url, target.sample),
        `${target.method} ${target.url} sample`,
      );
      for (const path of paths(target.sample)) {
        for (const bad of BAD_VALUES) {
          const res = await send(target.method, target.url, setAt(target.sample, path, bad));
          assertNo5xx(
            res,
            `${target.method} ${target.url} ${path.join('.')}=${JSON.stringify(bad)?.slice(0, 40)}`,
          );
          count += 1;
          if (res.statusCode >= 400) refused += 1;
        }
        // Unknown extra field next to this one.
        const parent = path.slice(0, -1);
        const container = parent.reduce<unknown>(
          (v, k) => (v as Record<string | number, unknown>)[k],
          target.sample,
        );
        if (container && typeof container === 'object' && !Array.isArray(container)) {
          const res = await send(
            target.method,
            target.url,
            setAt(target.sample, [...parent, 'unexpected_field'], 1),
          );
          assertNo5xx(res, `${target.method} ${target.url} ${parent.join('.')}.unexpected_field`);
          count += 1;
        }
      }
      for (const body of [null, [], 'string', 42, true, {}]) {
        assertNo5xx(
          await send(target.method, target.url, body),
          `${target.method} ${target.url} body=${JSON.stringify(body)}`,
        );
      }
      for (const raw of ['{', '{"name":', 'nul\u0000l', '']) {
        assertNo5xx(
          await send(target.method, target.url, raw, true),
          `${target.method} ${target.url} raw=${raw}`,
        );
      }
    }
    assert.ok(count > 1000, `only ${count} cases generated`);
    assert.ok(refused > count / 2, `only ${refused} of ${count} refused`);
  });

  it('answers malformed list queries, ids and secret keys with 4xx', async () => {
    const urls = [
      '/api/agents?runtime=1',
      '/api/agents?has_skills=maybe',
      '/api/agents?has_mcp[]=1',
      `/api/agents?search=${'x'.repeat(300)}`,
      '/api/agents?search=%00',
      '/api/agents?environment_id=%00',
      '/api/environments/%00',
      `/api/environments/${'x'.repeat(300)}`,
      `/api/environments/${ids.env}/secrets/%00`,
      "/api/vaults/'; DROP TABLE vaults; --",
    ];
    for (const url of urls) {
      for (const method of ['GET', 'DELETE', 'PUT'] as const) {
        const res = await t.app.inject({
          method,
          url,
          headers: user.auth,
          payload: method === 'PUT' ? {} : undefined,
        });
        assertNo5xx(res, `${method} ${url}`);
      }
    }
  });

  it('reads an empty JSON body as no body: a route without one answers, one that needs one says what is missing', async () => {
    const json = { ...user.auth, 'content-type': 'application/json' };
    for (const payload of ['', '  \n']) {
      const created = await t.app.inject({
        method: 'POST',
        url: '/api/vaults',
        headers: json,
        payload,
      });
      assert.equal(created.statusCode, 422, created.body);
      assert.equal(created.json().error, 'validation_failed');
      const listed = await t.app.inject({ method: 'GET', url: '/api/vaults', headers: json, payload });
      assert.equal(listed.statusCode, 200, listed.body);
    }
    const doomed = await t.app.inject({
      method: 'POST',
      url: '/api/vaults',
      headers: user.auth,
      payload: { name: 'empty-body-delete' },
    });
    assert.equal(doomed.statusCode, 201, doomed.body);
    const removed = await t.app.inject({
      method: 'DELETE',
      url: `/api/vaults/${(doomed.json() as { id: string }).id}`,
      headers: json,
      payload: '',
    });
    assert.equal(removed.statusCode, 204, removed.body);
  });

  it('never answers random JSON with a 5xx (fast-check)', async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...targets()), fc.jsonValue({ maxDepth: 4 }), async (target, body) => {
        assertNo5xx(
          await send(target.method, target.url, body),
          `${target.method} ${target.url} ${JSON.stringify(body).slice(0, 80)}`,
        );
      }),
      { numRuns: 300 },
    );
  });

  it('answers random specs inside bulk apply with 200 (400 only for a __proto__ key) (fast-check)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('Environment', 'Vault', 'Agent'),
        fc.dictionary(
          fc.constantFrom(
            ...Object.keys(ENV_SAMPLE),
            ...Object.keys(AGENT_SAMPLE),
            'secrets',
            'environment',
            'vaults',
          ),
          fc.jsonValue({ maxDepth: 3 }),
        ),
        async (kind, spec) => {
          const res = await send('POST', '/api/apply', { resources: [{ kind, name: 'random', spec }] });
          // A key, not a string value such as ["__proto__"] (JSON.stringify writes a key as "…": with no space).
          if (JSON.stringify(spec).includes('"__proto__":')) {
            // Prototype-poisoning keys are refused by the JSON parser for the whole body (docs/api.md).
            assert.equal(res.statusCode, 400, res.body.slice(0, 300));
            assert.equal((JSON.parse(res.body) as { error: string }).error, 'invalid_body');
          } else {
            assert.equal(res.statusCode, 200, res.body.slice(0, 300));
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});
