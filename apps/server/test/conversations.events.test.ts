// Turn events end to end (issue 10 item 3): a real sandboxd, the real app on a real port and
// PostgreSQL, a scripted runtime whose adapter reads `EVENT <json>` lines into turn events (as
// a real adapter reads its CLI's JSON lines) and every other line as raw, like a real adapter's
// unknown lines. The events are read back through the public API only: SSE and GET /events.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { RuntimeAdapter, TurnEvent } from '../src/conversations/contracts.ts';
import { REDACTION_MARKER } from '../src/conversations/log/redactor.ts';
import { scriptedAdapter } from './fixtures/scripted-runtime.ts';
import { type ConversationHarness, startConversationHarness } from './helpers/conversations.ts';
import type { TestUser } from './helpers/factories.ts';
import { openSse, type SseMessage } from './helpers/sse-client.ts';

// Quotes, backslashes and an apostrophe: its JSON-escaped forms differ from the value.
const SECRET = 'tok"en\\va\'l-58213-zz';
const ESCAPED = JSON.stringify(SECRET).slice(1, -1);
const ESCAPED_TWICE = JSON.stringify(ESCAPED).slice(1, -1);

const eventsAdapter: RuntimeAdapter = {
  ...scriptedAdapter,
  parseLine(line) {
    if (line.startsWith('EVENT ')) return [JSON.parse(line.slice('EVENT '.length)) as TurnEvent];
    if (line === 'BOOM') throw new Error('the adapter cannot read this line');
    return scriptedAdapter.parseLine(line);
  },
};

// The turn prints the secret (a vault secret, $TOKEN) inside text, a tool input at depth and a
// tool result that shows it JSON-escaped (a JSON file), each line JSON-escaped like a CLI's.
const SCRIPT = String.raw`esc=$(printf '%s' "$TOKEN" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g')
esc2=$(printf '%s' "$esc" | sed -e 's/\\/\\\\/g' -e 's/"/\\"/g')
echo hello
printf 'EVENT {"kind":"text","text":"the token is %s"}\n' "$esc"
printf 'EVENT {"kind":"tool_call","id":"c1","name":"Bash","input":{"command":"curl -H %s","env":[{"TOKEN":"%s"}]}}\n' "$esc" "$esc"
printf 'EVENT {"kind":"tool_result","id":"c1","is_error":false,"output":"{\\"token\\":\\"%s\\"}"}\n' "$esc2"
echo BOOM
echo warn >&2
echo PADDOCK_SESSION=sess-events-1
printf 'no newline at the end'`;

let h: ConversationHarness;
let user: TestUser;
let conversationId: string;
let turnId: string;

before(async () => {
  h = await startConversationHarness({ engine: { runtimes: (runtime) => ({ ...eventsAdapter, runtime }) } });
  user = await h.user();
  const vault = await h.vault(user);
  const put = await h.api(user, 'POST', `/api/vaults/${vault}/secrets`, { key: 'TOKEN', value: SECRET });
  assert.equal(put.status, 201);
  const agent = await h.agent(user, { vault_ids: [vault] });
  const conv = await h.start(user, { agent_id: agent, vault_id: vault, prompt: SCRIPT });
  conversationId = conv.id;
  const turn = await h.waitForTurn(user, conv.id, 1, 60_000);
  assert.equal(turn.status, 'succeeded', turn.error ?? '');
  assert.equal(turn.runtime_session_id, 'sess-events-1');
  turnId = turn.id;
});
after(async () => {
  await h?.close();
});

const streamUrl = (query: string) => `${h.url}/api/conversations/${conversationId}/stream?${query}`;
const dataOf = (m: SseMessage) => JSON.parse(m.data ?? '{}') as Record<string, unknown>;
const sent = (messages: SseMessage[]) => messages.filter((m) => m.event !== 'comment' && m.event !== 'end');

function assertNoSecret(text: string, where: string) {
  for (const form of [SECRET, ESCAPED, ESCAPED_TWICE])
    assert.ok(!text.includes(form), `${where} holds the secret as ${JSON.stringify(form)}`);
}

describe('turn events', () => {
  it("stores a turn's events in order with its output, a line the adapter cannot read as raw", async () => {
    const rows = (await h.events(conversationId)).filter((r) => r.turn_id === turnId);
    const events = rows.filter((r) => r.stream === 'events').map((r) => JSON.parse(r.text ?? ''));
    assert.deepEqual(events, [
      { kind: 'raw', line: 'hello' },
      { kind: 'text', text: `the token is ${REDACTION_MARKER}` },
      {
        kind: 'tool_call',
        id: 'c1',
        name: 'Bash',
        input: { command: `curl -H ${REDACTION_MARKER}`, env: [{ TOKEN: REDACTION_MARKER }] },
      },
      { kind: 'tool_result', id: 'c1', is_error: false, output: `{"token":"${REDACTION_MARKER}"}` },
      { kind: 'raw', line: 'BOOM' },
      { kind: 'session', session_id: 'sess-events-1' },
      { kind: 'raw', line: 'no newline at the end' },
    ]);
    // Each raw line's event follows the stdout rows that carry the line; the turn's end follows all.
    for (const line of ['hello\n', 'BOOM\n', 'no newline at the end']) {
      const at = rows.findIndex((r) => r.stream === 'events' && r.text?.includes(line.trim()));
      const before = rows
        .slice(0, at)
        .filter((r) => r.stream === 'stdout')
        .map((r) => r.text)
        .join('');
      assert.ok(before.includes(line), `the output of ${JSON.stringify(line)} comes before its event`);
    }
    const end = rows.findIndex((r) => r.stage === 'turn' && r.state === 'done');
    assert.ok(end > rows.findLastIndex((r) => r.stream === 'events'), 'the turn ends after its events');
    // The raw output still flows to stdout/stderr.
    assert.match(await h.stdout(conversationId, turnId), /^hello\nEVENT \{"kind":"text"/);
    assert.ok(rows.some((r) => r.stream === 'stderr' && r.text === 'warn\n'));
  });

  it('never stores or sends a secret inside a turn event: text, tool input, tool result, whole or JSON-escaped', async () => {
    const rows = await h.events(conversationId);
    assertNoSecret(rows.map((r) => `${r.text ?? ''}${r.message ?? ''}`).join('\n'), 'the rows');
    const all = await openSse(streamUrl('streams=stdout,stderr,stage,events&wait=false'), user.auth);
    await all.ended;
    assertNoSecret(all.raw(), 'the SSE stream');
    assert.ok(all.raw().includes(REDACTION_MARKER));
    const page = await h.api(
      user,
      'GET',
      `/api/conversations/${conversationId}/events?streams=stdout,events&limit=1000`,
    );
    assert.equal(page.status, 200);
    assertNoSecret(JSON.stringify(page.body), 'GET /events');
  });

  it('offers turn events only to readers that ask for them, with the same ids and payloads on SSE and GET /events', async () => {
    const plain = await openSse(streamUrl('wait=false'), user.auth);
    await plain.ended;
    assert.deepEqual(
      [...new Set(sent(plain.messages).map((m) => m.event))].sort(),
      ['stage', 'stderr', 'stdout'],
      'the default streams are unchanged',
    );
    const page = await h.api(user, 'GET', `/api/conversations/${conversationId}/events?limit=1000`);
    assert.ok(!page.body.data.some((e: { stream: string }) => e.stream === 'events'));

    const sse = await openSse(streamUrl('streams=events&wait=false'), user.auth);
    await sse.ended;
    const messages = sent(sse.messages);
    assert.equal(messages.length, 7);
    assert.ok(messages.every((m) => m.event === 'events'));
    const json = await h.api(user, 'GET', `/api/conversations/${conversationId}/events?streams=events`);
    assert.equal(json.status, 200);
    assert.deepEqual(json.body.data, messages.map(dataOf));
    const first = json.body.data[0];
    assert.deepEqual(Object.keys(first).sort(), ['created_at', 'event', 'id', 'stream', 'turn_id']);
    assert.equal(first.stream, 'events');
    assert.equal(first.turn_id, turnId);
    assert.equal(first.id, messages[0]!.id);
    assert.deepEqual(first.event, { kind: 'raw', line: 'hello' });
  });

  it('streams=events resumes strictly after Last-Event-ID and pages with next_cursor', async () => {
    const all = await h.api(user, 'GET', `/api/conversations/${conversationId}/events?streams=events`);
    const ids = all.body.data.map((e: { id: string }) => e.id);
    const resumed = await openSse(streamUrl('streams=events&wait=false'), {
      ...user.auth,
      'last-event-id': ids[2],
    });
    await resumed.ended;
    assert.deepEqual(
      sent(resumed.messages).map((m) => m.id),
      ids.slice(3),
    );
    const firstPage = await h.api(
      user,
      'GET',
      `/api/conversations/${conversationId}/events?streams=events&limit=4`,
    );
    assert.equal(firstPage.body.meta.has_more, true);
    const rest = await h.api(
      user,
      'GET',
      `/api/conversations/${conversationId}/events?streams=events&after=${firstPage.body.meta.next_cursor}`,
    );
    assert.deepEqual(
      [...firstPage.body.data, ...rest.body.data].map((e: { id: string }) => e.id),
      ids,
    );
    // Mixed with output, in id order.
    const mixed = await h.api(
      user,
      'GET',
      `/api/conversations/${conversationId}/events?streams=stdout,events`,
    );
    const mixedIds = mixed.body.data.map((e: { id: string }) => BigInt(e.id));
    assert.deepEqual(
      mixedIds,
      [...mixedIds].sort((a: bigint, b: bigint) => (a < b ? -1 : 1)),
    );
    assert.deepEqual([...new Set(mixed.body.data.map((e: { stream: string }) => e.stream))].sort(), [
      'events',
      'stdout',
    ]);
  });

  it('refuses an unknown stream with 422', async () => {
    const res = await h.api(
      user,
      'GET',
      `/api/conversations/${conversationId}/events?streams=events,thoughts`,
    );
    assert.equal(res.status, 422);
  });
});
