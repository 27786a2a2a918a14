// Issue 41, deliverable 3: the terminal WebSocket through the public listener, against the real
// sandboxd (a TTY exec of bash in the sandbox) with the scripted runtime. Who may open one (the
// owner, by API key or by a same-site session cookie), what it does (echo, resize, exit code,
// redaction), what it records (audit), and the sandbox's idle clock while it is open.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { insertSession } from '../src/auth/sessions.repo.ts';
import { SESSION_COOKIE } from '../src/auth/sessions.service.ts';
import { generateSecret } from '../src/auth/tokens.ts';
import { REDACTION_MARKER } from '../src/conversations/log/redactor.ts';
import { type ConversationHarness, startConversationHarness } from './helpers/conversations.ts';
import type { TestUser } from './helpers/factories.ts';
import { openTerminal, type TerminalClient } from './helpers/terminal-client.ts';

const SECRET = 'term-Secret-0a1b2c3d4e5f';
const EXTRA_ORIGIN = 'https://console.example.com';

let h: ConversationHarness;
let user: TestUser;
let other: TestUser;
let conversationId: string;
const open: TerminalClient[] = [];

before(async () => {
  h = await startConversationHarness({
    env: { CHECK_ORIGIN_EXTRA: EXTRA_ORIGIN },
    engine: { lifecycle: { tickMs: 100 } },
  });
  user = await h.user();
  other = await h.user();
  const environment = await h.environment(user);
  const put = await h.api(user, 'POST', `/api/environments/${environment}/secrets`, {
    key: 'TERM_SECRET',
    value: SECRET,
  });
  assert.equal(put.status, 201, JSON.stringify(put.body));
  const agent = await h.agent(user, { environment_id: environment });
  const conv = await h.start(user, { agent_id: agent, prompt: 'echo ready' });
  conversationId = conv.id;
  await h.waitForTurn(user, conv.id, 1, 60_000);
});
after(async () => {
  for (const client of open) client.close();
  await h?.close();
});

async function terminal(headers: Record<string, string> = user.auth, query = '', id = conversationId) {
  const opened = await openTerminal(h.url, id, headers, query);
  if (!('client' in opened)) throw new Error(`terminal refused: ${opened.status} ${opened.body}`);
  open.push(opened.client);
  return opened.client;
}

async function sessionCookieOf(who: TestUser): Promise<string> {
  const token = generateSecret();
  await insertSession(h.deps.db, who.id, {
    token,
    expiresAt: new Date(Date.now() + 3600_000),
    ip: null,
    userAgent: 'test',
  });
  return `${SESSION_COOKIE}=${token}`;
}

async function auditTypes(tenantId: string): Promise<{ type: string; metadata: Record<string, unknown> }[]> {
  return (await h.deps.db
    .selectFrom('audit_events')
    .select(['type', 'metadata'])
    .where('tenant_id', '=', tenantId)
    .where('type', 'like', 'conversation.terminal.%')
    .orderBy('created_at')
    .execute()) as { type: string; metadata: Record<string, unknown> }[];
}

describe('a terminal session', () => {
  it('runs echo, resizes (stty size shows it), ends with the shell exit code, audited', async () => {
    const t = await terminal(user.auth, '?cols=90&rows=20');
    t.write('echo hi-$((40+2))\r');
    await t.waitFor('hi-42');
    t.write('stty size\r');
    await t.waitFor(/20 90\r?\n/);
    t.resize(120, 33);
    const mark = t.output.length;
    t.write('stty size\r');
    await t.waitFor(/33 120\r?\n/, { from: mark });
    t.write('exit 7\r');
    assert.equal(await t.exited, 7);
    assert.equal(await t.closed, 1000);
    assert.deepEqual(t.controls.at(-1), { type: 'exit', code: 7 });

    const deadline = Date.now() + 5000;
    let rows = await auditTypes(user.id);
    while (rows.length < 2 && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
      rows = await auditTypes(user.id);
    }
    assert.deepEqual(
      rows.map((r) => r.type),
      ['conversation.terminal.opened', 'conversation.terminal.closed'],
    );
    assert.partialDeepStrictEqual(rows[0]?.metadata, { conversation_id: conversationId, cols: 90, rows: 20 });
    assert.partialDeepStrictEqual(rows[1]?.metadata, { conversation_id: conversationId, exit_code: 7 });
  });

  it("the terminal's output is redacted: the secret, and its base64", async () => {
    const t = await terminal();
    t.write('echo "v=$TERM_SECRET"; printf %s "$TERM_SECRET" | base64; echo done-$((1+1))\r');
    await t.waitFor('done-2');
    assert.ok(t.output.includes(`v=${REDACTION_MARKER}`), t.output);
    assert.ok(!t.output.includes(SECRET), t.output);
    assert.ok(!t.output.includes(Buffer.from(SECRET).toString('base64').slice(0, 20)), t.output);
    t.close();
  });
});

describe('who may open one', () => {
  it('another tenant: 404; the sandbox key: 403; no credential: 401', async () => {
    const foreign = await openTerminal(h.url, conversationId, other.auth);
    assert.equal(foreign.status, 404);
    const key = await h.deps.apiKeys.mintConversationKey(user.id, conversationId);
    const keyed = await openTerminal(h.url, conversationId, { authorization: `Bearer ${key.key}` });
    assert.equal(keyed.status, 403);
    assert.equal((await openTerminal(h.url, conversationId, {})).status, 401);
    const plain = await h.api(user, 'GET', `/api/conversations/${conversationId}/terminal`);
    assert.equal(plain.status, 426);
    assert.equal(plain.body.error, 'upgrade_required');
  });

  it('a session cookie: from this site or CHECK_ORIGIN_EXTRA only, never a foreign origin or none', async () => {
    const cookie = await sessionCookieOf(user);
    const own = h.config.publicUrl.origin;
    for (const origin of [own, EXTRA_ORIGIN]) {
      const t = await terminal({ cookie, origin });
      t.write('echo ok-$((2*3))\r');
      await t.waitFor('ok-6');
      t.close();
    }
    const foreign = await openTerminal(h.url, conversationId, { cookie, origin: 'https://evil.example' });
    assert.equal(foreign.status, 403);
    assert.match('body' in foreign ? foreign.body : '', /csrf_failed/);
    const none = await openTerminal(h.url, conversationId, { cookie });
    assert.equal(none.status, 403);
    const otherCookie = await sessionCookieOf(other);
    assert.equal(
      (await openTerminal(h.url, conversationId, { cookie: otherCookie, origin: own })).status,
      404,
    );
  });

  it('is bounded per conversation: 429 too_many_terminals beyond the cap', async () => {
    const options = h.deps.terminals.options;
    const before = options.maxPerConversation;
    options.maxPerConversation = 2;
    try {
      const a = await terminal();
      const b = await terminal();
      const third = await openTerminal(h.url, conversationId, user.auth);
      assert.equal(third.status, 429);
      assert.match('body' in third ? third.body : '', /too_many_terminals/);
      a.close();
      await a.closed;
      // The slot is released when the socket closes.
      const deadline = Date.now() + 5000;
      let again = await openTerminal(h.url, conversationId, user.auth);
      while (again.status === 429 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
        again = await openTerminal(h.url, conversationId, user.auth);
      }
      assert.equal(again.status, 101);
      if ('client' in again) again.client.close();
      b.close();
    } finally {
      options.maxPerConversation = before;
    }
  });
});

describe('the sandbox while a terminal is open', () => {
  it('an open terminal keeps the idle clock from reclaiming the sandbox; closed, it is reclaimed', async () => {
    const agent = await h.agent(user);
    const conv = await h.start(user, { agent_id: agent, prompt: 'true' });
    await h.waitForTurn(user, conv.id, 1, 60_000);
    const options = h.deps.terminals.options;
    const before = options.activityMs;
    options.activityMs = 100;
    try {
      const t = await terminal(user.auth, '', conv.id);
      t.write('echo up\r');
      await t.waitFor('up');
      // One second short of the idle timeout (60 minutes): without a beat the clock (a tick
      // every 100 ms) reclaims the sandbox a second from now, as the control below shows.
      const age = () =>
        h.deps.db
          .updateTable('conversations')
          .set({ last_activity_at: new Date(Date.now() - 60 * 60_000 + 1000) })
          .where('id', '=', conv.id)
          .execute();
      await age();
      await new Promise((r) => setTimeout(r, 3000));
      const warm = await h.get(user, conv.id);
      assert.equal(warm.sandbox?.status, 'ready');
      t.write('echo still-$((3+4))\r');
      await t.waitFor('still-7');
      t.close();
      await t.closed;
      // The control: the same age without a terminal is reclaimed.
      await age();
      await h.waitFor(user, conv.id, (c) => c.sandbox?.status === 'terminated', 10_000);
      const refused = await openTerminal(h.url, conv.id, user.auth);
      assert.equal(refused.status, 409);
      assert.match('body' in refused ? refused.body : '', /sandbox_not_running/);
    } finally {
      options.activityMs = before;
    }
  });

  it('terminating the conversation ends its terminal', async () => {
    const agent = await h.agent(user);
    const conv = await h.start(user, { agent_id: agent, prompt: 'true' });
    await h.waitForTurn(user, conv.id, 1, 60_000);
    const t = await terminal(user.auth, '', conv.id);
    t.write('echo alive\r');
    await t.waitFor('alive');
    const res = await h.api(user, 'POST', `/api/conversations/${conv.id}/terminate`);
    assert.ok(res.status < 300, JSON.stringify(res.body));
    const code = await Promise.race([
      t.closed,
      new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), 30_000)),
    ]);
    assert.notEqual(code, 'timeout');
  });
});
