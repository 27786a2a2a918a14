// Traces over OTLP (issue 40, deliverable 5; observability/tracing.ts): a real conversation (real
// app on a real port, real PostgreSQL, real sandboxd, the scripted runtime) with trace export
// pointed at a loopback OTLP/HTTP receiver. The spans are read as the receiver got them (OTLP
// JSON): the request, its queries, the sandbox calls, the provisioning stages and the turn,
// their parents, the conversation's id, and no secret anywhere.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { startTracing, type TracingHandle, tracesUrl } from '../src/observability/tracing.ts';
import { VERSION } from '../src/version.ts';
import { type ConversationHarness, startConversationHarness } from './helpers/conversations.ts';
import type { TestUser } from './helpers/factories.ts';
import { type LoopbackReceiver, startLoopbackReceiver } from './helpers/loopback-receiver.ts';

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
}
interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: { key: string; value: OtlpValue }[];
  status?: { code?: number };
}
interface OtlpExport {
  resourceSpans: {
    resource: { attributes: { key: string; value: OtlpValue }[] };
    scopeSpans: { spans: OtlpSpan[] }[];
  }[];
}

const SPAN_KIND_SERVER = 2;
const SPAN_KIND_CLIENT = 3;
const SECRET = 'trace-secret-value-90817-qq';

let receiver: LoopbackReceiver;
let tracing: TracingHandle;
let h: ConversationHarness;
let user: TestUser;
let conversationId: string;
let turnId: string;
let spans: OtlpSpan[];
let exports: OtlpExport[];

const attr = (span: OtlpSpan, key: string): string | number | boolean | undefined => {
  const v = span.attributes.find((a) => a.key === key)?.value;
  if (!v) return undefined;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  return v.boolValue;
};
const byId = (id: string | undefined) => spans.find((s) => s.spanId === id);
const parentOf = (span: OtlpSpan) => byId(span.parentSpanId);

before(async () => {
  receiver = await startLoopbackReceiver();
  tracing = await startTracing({ endpoint: `${receiver.url}/`, version: VERSION });
  h = await startConversationHarness();
  user = await h.user();
  const vault = await h.vault(user);
  const put = await h.api(user, 'POST', `/api/vaults/${vault}/secrets`, { key: 'TOKEN', value: SECRET });
  assert.equal(put.status, 201);
  const agent = await h.agent(user, { vault_ids: [vault] });
  const conv = await h.start(user, {
    agent_id: agent,
    vault_id: vault,
    prompt: 'echo "token $TOKEN"; echo done',
  });
  conversationId = conv.id;
  const turn = await h.waitForTurn(user, conv.id, 1, 60_000);
  assert.equal(turn.status, 'succeeded', turn.error ?? '');
  turnId = turn.id;
  // A health probe (polled every few seconds by an orchestrator) is not traced.
  assert.equal((await fetch(`${h.url}/health`)).status, 200);
  // The turn's span ends once its server has recorded the end (a moment after the row says so).
  const deadline = Date.now() + 15_000;
  do {
    await tracing.flush();
    exports = receiver.posts
      .filter((p) => p.path === '/v1/traces')
      .map((p) => JSON.parse(p.body) as OtlpExport);
    spans = exports.flatMap((e) => e.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans)));
    if (spans.some((s) => s.name === 'turn')) break;
    await new Promise((r) => setTimeout(r, 100));
  } while (Date.now() < deadline);
});
after(async () => {
  await h?.close();
  await tracing?.stop();
  await receiver?.close();
});

describe('traces over OTLP', () => {
  it('posts OTLP/HTTP JSON to <endpoint>/v1/traces, as paddock-server at this version', () => {
    assert.equal(tracesUrl('http://collector:4318/'), 'http://collector:4318/v1/traces');
    assert.ok(exports.length > 0, 'the receiver got no export');
    for (const post of receiver.posts) {
      assert.equal(post.path, '/v1/traces');
      assert.match(String(post.headers['content-type']), /application\/json/);
    }
    const resource = exports[0]!.resourceSpans[0]!.resource.attributes;
    const value = (key: string) => resource.find((a) => a.key === key)?.value.stringValue;
    assert.equal(value('service.name'), 'paddock-server');
    assert.equal(value('service.version'), VERSION);
  });

  it('traces an HTTP request as a SERVER span named by its route, its queries as children', () => {
    const request = spans.find((s) => s.name === 'POST /api/conversations');
    assert.ok(request, `no request span; names: ${[...new Set(spans.map((s) => s.name))].join(', ')}`);
    assert.equal(request.kind, SPAN_KIND_SERVER);
    assert.equal(attr(request, 'http.request.method'), 'POST');
    assert.equal(attr(request, 'http.route'), '/api/conversations');
    assert.equal(attr(request, 'http.response.status_code'), 201);
    assert.equal(request.parentSpanId ?? '', '', 'a request span is a root');
    assert.equal(
      spans.filter((s) => attr(s, 'url.path') === '/health').length,
      0,
      'a health probe was traced',
    );
    assert.ok(
      spans.some((s) => s.name === 'GET /api/conversations/:id/turns'),
      'the polls are traced',
    );

    const queries = spans.filter((s) => s.parentSpanId === request.spanId && s.name.startsWith('db '));
    assert.ok(queries.length > 0, 'the request has no query span');
    for (const q of queries) {
      assert.equal(q.kind, SPAN_KIND_CLIENT);
      assert.equal(q.traceId, request.traceId);
      assert.equal(attr(q, 'db.system'), 'postgresql');
      assert.equal(attr(q, 'db.operation.name'), q.name.slice(3));
      assert.equal(typeof attr(q, 'db.query.text'), 'string');
    }
    // The statements are parameterised: their values (the API key's hash, the ids) are not in them.
    assert.ok(queries.some((q) => String(attr(q, 'db.query.text')).includes('$1')));
  });

  it("traces provisioning as a `provisioning` span whose stages are its children, with the conversation's id", () => {
    const provision = spans.find((s) => s.name === 'provisioning');
    assert.ok(provision, 'no provisioning span');
    assert.equal(attr(provision, 'paddock.conversation_id'), conversationId);
    assert.equal(provision.parentSpanId ?? '', '', "a conversation's work is a trace of its own");
    const stages = spans.filter(
      (s) => s.name.startsWith('provisioning ') && s.parentSpanId === provision.spanId,
    );
    for (const stage of stages) {
      assert.equal(attr(stage, 'paddock.conversation_id'), conversationId);
      assert.equal(stage.name, `provisioning ${attr(stage, 'paddock.stage')}`);
      assert.equal(stage.traceId, provision.traceId);
    }
    // The stages of this provisioning (the scripted runtime has no probe): the sandbox and its env file.
    assert.deepEqual(
      stages.map((s) => s.name),
      ['provisioning provision'],
    );
  });

  it('traces sandbox backend calls as CLIENT spans under the stage or turn that made them', () => {
    const calls = spans.filter((s) => s.name.startsWith('sandbox '));
    assert.ok(calls.length > 0, 'no sandbox span');
    for (const call of calls) {
      assert.equal(call.kind, SPAN_KIND_CLIENT);
      assert.equal(attr(call, 'paddock.conversation_id'), conversationId);
      assert.equal(attr(call, 'paddock.sandbox.operation'), call.name.slice('sandbox '.length));
    }
    const create = calls.find((c) => c.name === 'sandbox create');
    assert.ok(create, 'no sandbox create span');
    assert.equal(parentOf(create)?.name, 'provisioning provision');
    // The stage's own queries are its children too (the conversation's work is traced to the database).
    assert.ok(
      spans.some((s) => s.name.startsWith('db ') && attr(s, 'paddock.conversation_id') === conversationId),
      'no query span of the conversation',
    );
  });

  it("traces the turn with the conversation's and the turn's ids, its exec as a child", () => {
    const turn = spans.find((s) => s.name === 'turn');
    assert.ok(turn, 'no turn span');
    assert.equal(attr(turn, 'paddock.conversation_id'), conversationId);
    assert.equal(attr(turn, 'paddock.turn_id'), turnId);
    assert.notEqual(turn.status?.code, 2, 'a succeeded turn is not an error');
    const children = spans.filter((s) => s.parentSpanId === turn.spanId).map((s) => s.name);
    assert.ok(children.includes('sandbox execStream'), `the turn's children: ${children.join(', ')}`);
  });

  it('puts no secret in any span: neither the vault secret nor the API key', () => {
    const everything = receiver.posts.map((p) => p.body).join('\n');
    assert.ok(!everything.includes(SECRET), 'a span holds the vault secret');
    assert.ok(!everything.includes(user.apiKey), 'a span holds the API key');
    assert.ok(!everything.includes(h.config.sandbox.token ?? '\u0000'), 'a span holds the sandbox token');
  });
});
