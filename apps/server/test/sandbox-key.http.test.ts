// Issue 35 (findings 1, 2, 4, 11): what a sandbox's key (PADDOCK_TOKEN, conversation scope) may
// do under /api/conversations, through the public API against the real sandboxd — the rule of
// conversations/api/sandbox-key.ts, route by route, for the key of conversation A against A, A's
// child, A's parent, a sibling and another account; what it may start (environment, vault,
// delegation, depth, live children); a parent's secret values redacting its child; and the
// bound on the prompts and images one conversation stores.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { v7 as uuidv7 } from 'uuid';
import {
  CONVERSATION_INPUT_MAX_BYTES,
  IMAGE_MAX_BYTES,
} from '../src/conversations/api/conversations.schemas.ts';
import { MAX_DEPTH, MAX_LIVE_CHILDREN } from '../src/conversations/api/sandbox-key.ts';
import { type ConversationHarness, startConversationHarness } from './helpers/conversations.ts';
import type { TestUser } from './helpers/factories.ts';

let h: ConversationHarness;
before(async () => {
  h = await startConversationHarness();
});
after(async () => {
  await h.close();
});

/**
 * A conversation as rows only (idle, no sandbox): what the key's reads and admissions look at.
 * The conversations a key starts are real ones, provisioned through the API.
 */
async function row(
  user: TestUser,
  agentId: string | null,
  options: { parent?: string; vault?: string; title?: string } = {},
): Promise<string> {
  const id = uuidv7();
  await h.deps.db
    .insertInto('conversations')
    .values({
      id,
      tenant_id: user.id,
      agent_id: agentId,
      vault_id: options.vault ?? null,
      status: 'idle',
      source: options.parent ? 'sandbox' : 'api',
      parent_conversation_id: options.parent ?? null,
      title: options.title ?? 'a conversation',
    })
    .execute();
  return id;
}

/** The sandbox key of a conversation, as the caller of h.api. */
async function keyOf(user: TestUser, conversationId: string): Promise<TestUser & { key: string }> {
  const minted = await h.deps.apiKeys.mintConversationKey(user.id, conversationId);
  return { ...user, key: minted.key, auth: { authorization: `Bearer ${minted.key}` } };
}

const idle = (c: { status: string }) => c.status === 'idle';

describe('the sandbox key reads and stops only its own conversation and its descendants', () => {
  it('answers every route for the key of A against A, its child, its parent, a sibling and another account', async () => {
    const owner = await h.user();
    const agent = await h.agent(owner);
    const parent = await row(owner, agent, { title: 'the parent, secret plans' });
    const a = await row(owner, agent, { parent, title: 'conversation A' });
    const sibling = await row(owner, agent, { parent, title: 'the sibling, secret plans' });
    const stranger = await h.user();
    const other = await row(stranger, await h.agent(stranger), { title: 'another account, secret plans' });
    const key = await keyOf(owner, a);
    const started = await h.api(key, 'POST', '/api/conversations', { agent_id: agent, prompt: 'echo child' });
    assert.equal(started.status, 201, JSON.stringify(started.body));
    const child = started.body.id as string;
    assert.equal(started.body.parent_conversation_id, a);
    await h.waitFor(owner, child, idle);

    const targets = { A: a, child, parent, sibling, other } as const;
    const reachable = new Set(['A', 'child']);
    for (const [name, id] of Object.entries(targets)) {
      for (const path of [`/${id}`, `/${id}/turns`, `/${id}/events`, `/${id}/stream?wait=false`]) {
        const res = await h.api(key, 'GET', `/api/conversations${path}`);
        assert.equal(res.status, reachable.has(name) ? 200 : 404, `GET ${name} ${path}`);
        if (!reachable.has(name)) {
          assert.equal(res.body.error, 'not_found');
          assert.ok(!JSON.stringify(res.body).includes('secret plans'), `GET ${name} ${path} leaks nothing`);
        }
      }
      const prompt = await h.api(key, 'POST', `/api/conversations/${id}/prompts`, { prompt: 'true' });
      assert.equal(prompt.status, 403, `a prompt to ${name}`);
    }
    assert.equal((await h.turns(owner, child))[0]?.prompt, 'echo child');
    const childTurns = await h.api(key, 'GET', `/api/conversations/${child}/turns`);
    assert.equal(childTurns.body.data[0].prompt, 'echo child');

    for (const [query, expected] of [
      ['', [child, a]],
      [`?agent_id=${agent}`, [child, a]],
      ['?status=idle', [child, a]],
      ['?limit=1', [child]],
      [`?parent_id=${a}`, [child]],
      // The parent's children are A and the sibling; the key sees only A.
      [`?parent_id=${parent}`, [a]],
    ] as const) {
      const list = await h.api(key, 'GET', `/api/conversations${query}`);
      assert.equal(list.status, 200);
      const ids = list.body.data.map((c: { id: string }) => c.id);
      assert.deepEqual(ids, expected, `GET /api/conversations${query}`);
    }
    const full = await h.api(owner, 'GET', '/api/conversations');
    assert.equal(full.body.data.length, 4, "the owner's own list is whole");

    // Stopping: a descendant only; its own conversation is the owner's to stop.
    const controls = [
      ['POST', 'interrupt'],
      ['POST', 'terminate'],
      ['DELETE', ''],
    ] as const;
    for (const [method, action] of controls) {
      for (const [name, id] of Object.entries(targets)) {
        if (name === 'child') continue;
        const res = await h.api(key, method, `/api/conversations/${id}${action ? `/${action}` : ''}`);
        assert.equal(res.status, name === 'A' ? 403 : 404, `${method} ${action} ${name}`);
        assert.equal(res.body.error, name === 'A' ? 'forbidden' : 'not_found');
      }
    }
    const interrupt = await h.api(key, 'POST', `/api/conversations/${child}/interrupt`);
    assert.equal(interrupt.status, 409, 'the child is idle: the rule let the interrupt through');
    assert.equal(interrupt.body.error, 'no_turn_running');
    const terminate = await h.api(key, 'POST', `/api/conversations/${child}/terminate`);
    assert.equal(terminate.status, 200);
    assert.equal(terminate.body.status, 'terminated');
    assert.equal((await h.api(key, 'DELETE', `/api/conversations/${child}`)).status, 204);
    assert.equal((await h.api(owner, 'GET', `/api/conversations/${child}`)).status, 404);
    for (const id of [a, parent, sibling]) assert.equal((await h.get(owner, id)).status, 'idle');
    assert.equal((await h.get(stranger, other)).status, 'idle');
  });

  it('reads the descendants of its descendants, and loses a child to nobody else', async () => {
    const owner = await h.user();
    const agent = await h.agent(owner);
    const a = await row(owner, agent);
    const child = await row(owner, agent, { parent: a });
    const grandchild = await row(owner, agent, { parent: child });
    const key = await keyOf(owner, a);
    assert.equal((await h.api(key, 'GET', `/api/conversations/${grandchild}`)).status, 200);
    const list = await h.api(key, 'GET', '/api/conversations');
    assert.deepEqual(
      list.body.data.map((c: { id: string }) => c.id),
      [grandchild, child, a],
    );
    // The child's key reads down, never up.
    const childKey = await keyOf(owner, child);
    assert.equal((await h.api(childKey, 'GET', `/api/conversations/${a}`)).status, 404);
    assert.equal((await h.api(childKey, 'GET', `/api/conversations/${grandchild}`)).status, 200);
    // Deleting the child would unlink the grandchild (out of the key's reach, out from under
    // the depth bound): the key deletes from the bottom up.
    const early = await h.api(key, 'DELETE', `/api/conversations/${child}`);
    assert.equal(early.status, 409);
    assert.equal(early.body.error, 'conflict');
    assert.equal((await h.api(key, 'DELETE', `/api/conversations/${grandchild}`)).status, 204);
    assert.equal((await h.api(key, 'DELETE', `/api/conversations/${child}`)).status, 204);
    assert.equal((await h.get(owner, a)).status, 'idle');
  });
});

describe('the sandbox key starts children only with what its sandbox holds', () => {
  it('admits agents of its environment with its vault or none, others only when delegated, and bounds live children', async () => {
    const owner = await h.user();
    const low = await h.environment(owner);
    const prod = await h.environment(owner);
    const mine = await h.vault(owner);
    const another = await h.vault(owner);
    const agent = await h.agent(owner, { environment_id: low, vault_ids: [mine, another] });
    const sameEnvironment = await h.agent(owner, { environment_id: low });
    const prodAgent = await h.agent(owner, { environment_id: prod, vault_ids: [another] });
    const noEnvironment = await h.agent(owner);
    const a = await row(owner, agent, { vault: mine });
    const key = await keyOf(owner, a);
    const start = (body: Record<string, unknown>) =>
      h.api(key, 'POST', '/api/conversations', { prompt: 'true', ...body });

    for (const [body, code] of [
      [{ agent_id: prodAgent }, 'agent_not_delegated'],
      [{ agent_id: noEnvironment }, 'agent_not_delegated'],
      [{ agent_id: agent, vault_id: another }, 'vault_not_delegated'],
    ] as const) {
      const res = await start(body);
      assert.equal(res.status, 403, JSON.stringify(body));
      assert.equal(res.body.error, code);
    }
    // The existing gates still come first: a vault off the agent's allowlist is 422.
    assert.equal(
      (await start({ agent_id: sameEnvironment, vault_id: mine })).body.error,
      'vault_not_allowed',
    );
    const started: string[] = [];
    for (const body of [{ agent_id: sameEnvironment }, { agent_id: agent, vault_id: mine }]) {
      const res = await start(body);
      assert.equal(res.status, 201, JSON.stringify(res.body));
      started.push(res.body.id);
    }

    // The owner delegates the prod agent on the agent: then it starts, with a vault of its allowlist.
    const { body: current } = await h.api(owner, 'GET', `/api/agents/${agent}`);
    const fields = {
      name: current.name,
      model: current.model,
      runtime: current.runtime,
      environment_id: current.environment_id,
      vault_ids: current.vault_ids,
    };
    const foreign = await h.agent(await h.user());
    const refused = await h.api(owner, 'PUT', `/api/agents/${agent}`, {
      ...fields,
      delegate_agent_ids: [foreign],
    });
    assert.equal(refused.status, 404, "another account's agent cannot be delegated");
    const put = await h.api(owner, 'PUT', `/api/agents/${agent}`, {
      ...fields,
      delegate_agent_ids: [prodAgent],
    });
    assert.equal(put.status, 200, JSON.stringify(put.body));
    assert.deepEqual(put.body.delegate_agent_ids, [prodAgent]);
    assert.deepEqual((await h.api(owner, 'GET', `/api/agents/${agent}`)).body.delegate_agent_ids, [
      prodAgent,
    ]);
    const delegated = await start({ agent_id: prodAgent, vault_id: another });
    assert.equal(delegated.status, 201, JSON.stringify(delegated.body));
    started.push(delegated.body.id);
    assert.equal(started.length, MAX_LIVE_CHILDREN);

    // Three children with a live sandbox: the next one waits (inside the owner's quota of 5).
    const full = await start({ agent_id: agent });
    assert.equal(full.status, 429);
    assert.equal(full.body.error, 'sub_conversation_limit_exceeded');
    assert.equal(full.headers.get('retry-after'), '30');
    for (const id of started) await h.waitFor(owner, id, idle);
    const terminated = await h.api(key, 'POST', `/api/conversations/${started[0]}/terminate`);
    assert.equal(terminated.status, 200);
    await h.waitFor(owner, started[0] ?? '', (c) => c.sandbox?.status === 'terminated');
    const again = await start({ agent_id: agent });
    assert.equal(again.status, 201, 'a terminated child frees its place');
    await h.waitFor(owner, again.body.id, idle);
  });

  it('admits exactly the live-children bound of parallel starts', async () => {
    const owner = await h.user();
    const agent = await h.agent(owner);
    const key = await keyOf(owner, await row(owner, agent));
    const answers = await Promise.all(
      Array.from({ length: 2 * MAX_LIVE_CHILDREN }, () =>
        h.api(key, 'POST', '/api/conversations', { agent_id: agent, prompt: 'true' }),
      ),
    );
    const admitted = answers.filter((r) => r.status === 201);
    assert.equal(admitted.length, MAX_LIVE_CHILDREN);
    for (const r of answers.filter((x) => x.status !== 201)) {
      assert.equal(r.status, 429);
      assert.equal(r.body.error, 'sub_conversation_limit_exceeded');
    }
    for (const r of admitted) await h.waitFor(owner, r.body.id, idle);
  });

  it(`refuses a sub-conversation deeper than ${MAX_DEPTH} levels`, async () => {
    const owner = await h.user();
    const agent = await h.agent(owner);
    let id = await row(owner, agent);
    const chain = [id];
    for (let depth = 1; depth <= MAX_DEPTH; depth++) {
      id = await row(owner, agent, { parent: id });
      chain.push(id);
    }
    const deepest = await keyOf(owner, chain[MAX_DEPTH] ?? '');
    const refused = await h.api(deepest, 'POST', '/api/conversations', { agent_id: agent, prompt: 'true' });
    assert.equal(refused.status, 403);
    assert.equal(refused.body.error, 'sub_conversation_depth_exceeded');
    const above = await keyOf(owner, chain[MAX_DEPTH - 1] ?? '');
    const admitted = await h.api(above, 'POST', '/api/conversations', { agent_id: agent, prompt: 'true' });
    assert.equal(admitted.status, 201, JSON.stringify(admitted.body));
    await h.waitFor(owner, admitted.body.id, idle);
  });
});

describe("a parent's secret values redact what its child stores (finding 4)", () => {
  it("redacts the parent's secrets and key from the child's title, its prompt and its log", async () => {
    const owner = await h.user();
    const low = await h.environment(owner);
    const SECRET = 'low-secret-value-7c1f9a2b3d';
    const put = await h.api(owner, 'POST', `/api/environments/${low}/secrets`, {
      key: 'LOW_TOKEN',
      value: SECRET,
    });
    assert.equal(put.status, 201, JSON.stringify(put.body));
    const prod = await h.environment(owner);
    const child = await h.agent(owner, { environment_id: prod });
    const agent = await h.agent(owner, { environment_id: low, delegate_agent_ids: [child] });
    const a = await row(owner, agent);
    const key = await keyOf(owner, a);
    // The child is on another environment: it is not given LOW_TOKEN, and prints it assembled.
    const prompt = [
      `# from the parent: ${SECRET}`,
      `printf '%s%s\\n' '${SECRET.slice(0, 12)}' '${SECRET.slice(12)}'`,
      `: ${key.key}`,
    ].join('\n');
    const res = await h.api(key, 'POST', '/api/conversations', { agent_id: child, prompt });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    const done = await h.waitFor(owner, res.body.id, idle);
    assert.ok(!done.title.includes(SECRET), done.title);
    assert.equal(done.title, 'from the parent: [REDACTED]');
    const [turn] = await h.turns(owner, res.body.id);
    assert.ok(turn && !turn.prompt.includes(SECRET) && !turn.prompt.includes(key.key), turn?.prompt);
    assert.equal(turn?.status, 'succeeded');
    assert.equal(await h.stdout(res.body.id), '[REDACTED]\n');
    const rows = await h.events(res.body.id);
    assert.ok(!JSON.stringify(rows).includes(SECRET));
  });
});

describe('the prompts and images a conversation stores are bounded (finding 11)', () => {
  it('bounds the bytes of prompts and images a conversation stores', async () => {
    const owner = await h.user();
    const agent = await h.agent(owner);
    const conv = await h.start(owner, { agent_id: agent, prompt: 'true' });
    await h.waitFor(owner, conv.id, idle);
    // An image at its limit: a PNG signature, then zeros (only the signature is checked).
    const png = Buffer.alloc(IMAGE_MAX_BYTES);
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]).copy(png);
    const image = { media_type: 'image/png', data: png.toString('base64') };
    const prompt = async (images: number) =>
      await h.api(owner, 'POST', `/api/conversations/${conv.id}/prompts`, {
        prompt: 'true',
        images: Array.from({ length: images }, () => image),
      });
    let stored = 4;
    for (const images of [4, 4]) {
      const res = await prompt(images);
      assert.equal(res.status, 202, JSON.stringify(res.body));
      stored += 4 + images * IMAGE_MAX_BYTES;
      await h.waitForTurn(owner, conv.id, res.body.turn.seq);
    }
    const refused = await prompt(2);
    assert.equal(refused.status, 409);
    assert.equal(refused.body.error, 'conversation_storage_exceeded');
    assert.equal(refused.body.limit, CONVERSATION_INPUT_MAX_BYTES);
    assert.equal(refused.body.used, stored);
    const row = await h.deps.db
      .selectFrom('conversations')
      .select('input_bytes')
      .where('id', '=', conv.id)
      .executeTakeFirstOrThrow();
    assert.equal(Number(row.input_bytes), stored);
    // What still fits is taken.
    const small = await prompt(1);
    assert.equal(small.status, 202, JSON.stringify(small.body));
    assert.equal((await h.turns(owner, conv.id)).length, 4);
  });
});
