// An agent's model must be one its runtime can run (agents/agents.models.ts): create, update
// and bulk apply refuse a mismatch with 422 (apply: an `error` result) naming `model`, and what
// may work through a gateway passes. Agents stored before the rule still list and load.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { v7 as uuidv7 } from 'uuid';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';

let t: TestApp;
let user: TestUser;
before(async () => {
  t = await buildTestApp();
  user = await createVerifiedUser(t.deps.db);
});
after(async () => {
  await t.close();
});

type Json = Record<string, unknown>;

async function call(method: string, url: string, payload?: unknown) {
  const res = await t.app.inject({
    method: method as 'GET',
    url,
    headers: user.auth,
    ...(payload === undefined ? {} : { payload: payload as Json }),
  });
  return { status: res.statusCode, body: res.body === '' ? null : (res.json() as Json), raw: res.body };
}

const MISMATCHES: Array<[runtime: string, model: string, message: RegExp]> = [
  [
    'codex',
    'anthropic/claude-sonnet-4-5',
    /^codex runs OpenAI models \(openai\/<model_id>\); anthropic\/claude-sonnet-4-5 is an Anthropic model: choose an OpenAI model, or the claude or opencode runtime$/,
  ],
  ['claude', 'openai/gpt-5', /^claude runs Anthropic models .*openai\/gpt-5 is an OpenAI model/],
  ['claude', 'google/gemini-2.5-pro', /^claude runs Anthropic models .* is a Gemini model/],
  ['gemini', 'anthropic/claude-sonnet-4-5', /^gemini runs Gemini models .* is an Anthropic model/],
  ['gemini', 'openai/gpt-5', /^gemini runs Gemini models .* is an OpenAI model/],
  ['codex', 'gemini/gemini-2.5-flash', /^codex runs OpenAI models .* is a Gemini model/],
  ['opencode', 'ollama/llama3', /^opencode runs models of anthropic, openai or google .*not of "ollama"$/],
  ['opencode', 'constructor/x', /not of "constructor"$/],
];

describe('the model of an agent and its runtime', () => {
  it('refuses a model the runtime cannot run on create and update, with 422 on model', async () => {
    const ok = await call('POST', '/api/agents', { name: 'fits', runtime: 'codex', model: 'openai/gpt-5' });
    assert.equal(ok.status, 201, ok.raw);
    for (const [runtime, model, message] of MISMATCHES) {
      const created = await call('POST', '/api/agents', { name: `m-${runtime}`, runtime, model });
      assert.equal(created.status, 422, `${runtime} ${model} → ${created.raw}`);
      assert.equal(created.body!['error'], 'validation_failed');
      const errors = created.body!['errors'] as Record<string, string[]>;
      assert.deepEqual(Object.keys(errors), ['model']);
      assert.match(errors['model']![0]!, message);

      const updated = await call('PUT', `/api/agents/${ok.body!['id']}`, { name: 'fits', runtime, model });
      assert.equal(updated.status, 422, `${runtime} ${model} → ${updated.raw}`);
      assert.match((updated.body!['errors'] as Record<string, string[]>)['model']![0]!, message);
    }
    const kept = await call('GET', `/api/agents/${ok.body!['id']}`);
    assert.equal(kept.body!['model'], 'openai/gpt-5', 'a refused update changes nothing');
    const names = ((await call('GET', '/api/agents')).body!['data'] as Json[]).map((a) => a['name']);
    assert.deepEqual(names, ['fits'], 'a refused create stores nothing');
  });

  it('accepts every model that may work: its own provider, and for claude, codex and gemini any other name', async () => {
    const fits: Array<[string, string]> = [
      ['claude', 'anthropic/claude-sonnet-4-5'],
      ['claude', 'bedrock/anthropic.claude-sonnet-4-5'],
      ['codex', 'openai/gpt-5.5'],
      ['codex', 'openrouter/openai/gpt-5'],
      ['codex', 'constructor/gpt-5'],
      ['gemini', 'google/gemini-2.5-flash'],
      ['gemini', 'gemini/gemini-2.5-pro'],
      ['opencode', 'anthropic/claude-sonnet-4-5'],
      ['opencode', 'openai/gpt-5.5'],
      ['opencode', 'google/gemini-2.5-pro'],
      ['opencode', 'gemini/gemini-2.5-flash'],
    ];
    for (const [i, [runtime, model]] of fits.entries()) {
      const res = await call('POST', '/api/agents', { name: `fits-${i}`, runtime, model });
      assert.equal(res.status, 201, `${runtime} ${model} → ${res.raw}`);
    }
  });

  it('refuses a mismatch in bulk apply as an error result on spec.model, and applies the rest', async () => {
    const res = await call('POST', '/api/apply', {
      resources: [
        {
          kind: 'Agent',
          name: 'apply-bad',
          spec: { runtime: 'codex', model: 'anthropic/claude-sonnet-4-5' },
        },
        { kind: 'Agent', name: 'apply-good', spec: { runtime: 'codex', model: 'openai/gpt-5' } },
      ],
    });
    assert.equal(res.status, 200, res.raw);
    const [bad, good] = res.body!['results'] as Json[];
    assert.equal(bad!['action'], 'error');
    assert.equal(bad!['code'], 'validation_failed');
    assert.deepEqual(Object.keys(bad!['errors'] as Json), ['spec.model']);
    assert.match(
      (bad!['errors'] as Record<string, string[]>)['spec.model']![0]!,
      /^codex runs OpenAI models .* is an Anthropic model/,
    );
    assert.equal(good!['action'], 'created');
  });

  it('still lists and loads an agent stored before the rule', async () => {
    const other = await createVerifiedUser(t.deps.db);
    const id = uuidv7();
    await t.deps.db
      .insertInto('agents')
      .values({
        id,
        tenant_id: other.id,
        name: 'legacy',
        model: 'anthropic/claude-sonnet-4-5',
        runtime: 'codex',
        skills: '[]',
        mcp_servers: '{}',
        metadata: '{}',
      })
      .execute();
    const get = await t.app.inject({ method: 'GET', url: `/api/agents/${id}`, headers: other.auth });
    assert.equal(get.statusCode, 200, get.body);
    assert.equal(get.json().model, 'anthropic/claude-sonnet-4-5');
    const list = await t.app.inject({ method: 'GET', url: '/api/agents', headers: other.auth });
    assert.equal(list.statusCode, 200);
    assert.deepEqual(
      list.json().data.map((a: Json) => a['name']),
      ['legacy'],
    );
  });
});
