// The single log writer against the real PostgreSQL: what it stores, counts, refuses and signals.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import {
  type ConversationRow,
  insertConversation,
  insertTurn,
  logRows,
  storedText,
} from '../../../test/helpers/conversation-rows.ts';
import { createTestDatabase, type TestDatabase } from '../../../test/helpers/database.ts';
import { createVerifiedUser } from '../../../test/helpers/factories.ts';
import { createLogger } from '../../observability/logger.ts';
import { createMetrics } from '../../observability/metrics.ts';
import { type FeedSignal, StaleOwnerError } from '../contracts.ts';
import { createFeed, type PgFeed, RESYNC_LAST_ID } from './feed.ts';
import { type LogEventRow, listLogEvents } from './log-events.repo.ts';
import { createLogWriter, type LogWriterDeps, truncationMessage } from './log-writer.ts';
import { createSecretRegistry, REDACTION_MARKER, type SecretRegistry } from './redactor.ts';
import { secretForms } from './secret-forms.ts';

let database: TestDatabase;
let feed: PgFeed;
let tenantId: string;
const logs: string[] = [];
const logger = createLogger({
  level: 'debug',
  destination: new Writable({
    write(chunk, _enc, cb) {
      logs.push(String(chunk));
      cb();
    },
  }),
});

before(async () => {
  database = await createTestDatabase();
  feed = createFeed({ pool: database.handle.pool, clientConfig: { connectionString: database.url }, logger });
  tenantId = (await createVerifiedUser(database.handle.db)).id;
});
after(async () => {
  await feed.close();
  await database.drop();
});

function deps(overrides: Partial<LogWriterDeps> = {}): LogWriterDeps {
  return { pool: database.handle.pool, feed, logger, outputBudgetMb: 0, ...overrides };
}

function writerFor(
  conversation: ConversationRow,
  registry: SecretRegistry,
  overrides: Partial<LogWriterDeps> = {},
) {
  return createLogWriter(deps(overrides), {
    lease: { tenantId: conversation.tenantId, conversationId: conversation.id, epoch: conversation.epoch },
    registry,
  });
}

async function turnBytes(turnId: string): Promise<{ stdout: number; stderr: number }> {
  const row = await database.handle.db
    .selectFrom('turns')
    .select(['stdout_raw_bytes', 'stderr_raw_bytes'])
    .where('id', '=', turnId)
    .executeTakeFirstOrThrow();
  return { stdout: Number(row.stdout_raw_bytes), stderr: Number(row.stderr_raw_bytes) };
}

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Another process takes the conversation over: its epoch moves on. Returns the new one. */
async function takeOver(conversation: ConversationRow): Promise<string> {
  const epoch = Number(conversation.epoch) + 1;
  await database.handle.db
    .updateTable('conversations')
    .set({ owner_epoch: epoch })
    .where('id', '=', conversation.id)
    .execute();
  return String(epoch);
}

describe('the log writer', () => {
  it('stores output in order as rows and wakes readers after the commit with the last id', async () => {
    const conversation = await insertConversation(database.handle.db, tenantId);
    const signals: FeedSignal[] = [];
    const seenRows: number[] = [];
    const unsubscribe = feed.subscribe(conversation.id, (signal) => {
      signals.push(signal);
      // The rows are committed when the signal arrives.
      void logRows(database.handle.db, conversation.id).then((rows) => seenRows.push(rows.length));
    });
    const writer = writerFor(conversation, createSecretRegistry());
    writer.output('stdout', Buffer.from('one\n'));
    writer.output('stderr', Buffer.from('warn\n'));
    writer.output('stdout', Buffer.from('two\n'));
    await writer.flush();
    await wait(50);
    unsubscribe();
    await writer.close();
    const rows = await logRows(database.handle.db, conversation.id);
    assert.deepEqual(
      rows.map((r) => [r.stream, r.data?.toString()]),
      [
        ['stdout', 'one\n'],
        ['stderr', 'warn\n'],
        ['stdout', 'two\n'],
      ],
    );
    // (A resync signal, lastId '', may come when the feed starts listening: not from the writer.)
    const events = signals.filter((s) => s.type === 'events' && s.lastId !== RESYNC_LAST_ID);
    assert.ok(events.length >= 1);
    const last = events.at(-1);
    assert.equal(last?.type, 'events');
    assert.equal(last.type === 'events' && last.lastId, rows.at(-1)!.id);
    assert.ok(seenRows.every((n) => n > 0));
    assert.throws(() => writer.output('stdout', Buffer.from('late')), /closed/);
  });

  it('hands the rows it committed to the feed, as stored', async () => {
    const conversation = await insertConversation(database.handle.db, tenantId);
    const turnId = await insertTurn(database.handle.db, conversation);
    const batches: { lastId: string; after: string; rows: LogEventRow[] }[] = [];
    const unsubscribe = feed.subscribe(conversation.id, (signal) => {
      if (signal.type === 'events' && signal.committed)
        batches.push({ lastId: signal.lastId, ...signal.committed });
    });
    const writer = writerFor(conversation, createSecretRegistry());
    writer.output('stdout', Buffer.from('one\n'), turnId);
    await writer.flush();
    await writer.stage({ stage: 'turn', state: 'done', durationMs: 12, turnId, message: 'ok' });
    writer.output('stderr', Buffer.from('two\n'), turnId);
    await writer.close();
    unsubscribe();
    const stored = await listLogEvents(database.handle.db, tenantId, conversation.id, {
      after: '0',
      streams: null,
      limit: 100,
    });
    assert.equal(stored.length, 3);
    assert.ok(batches.length >= 2, `${batches.length} batches`);
    // Exactly the stored rows, in order, with their ids and timestamps.
    const handed = batches.flatMap((b) => b.rows);
    assert.deepEqual(
      handed.map((r) => ({ ...r, id: String(r.id) })),
      stored.map((r) => ({ ...r, id: String(r.id) })),
    );
    // Each batch names the last row of the one before (the first: the empty log's '0'), and its own last.
    assert.equal(batches[0]!.after, '0');
    for (let i = 1; i < batches.length; i++) assert.equal(batches[i]!.after, batches[i - 1]!.lastId);
    for (const b of batches) assert.equal(b.lastId, String(b.rows.at(-1)!.id));
  });

  it("chains a new writer's first batch to the rows an earlier owner's writer committed", async () => {
    const conversation = await insertConversation(database.handle.db, tenantId);
    const turnId = await insertTurn(database.handle.db, conversation);
    const first = writerFor(conversation, createSecretRegistry());
    first.output('stdout', Buffer.from('before the restart\n'), turnId);
    await first.close();
    // Rows of another conversation committed meanwhile do not count.
    const other = writerFor(await insertConversation(database.handle.db, tenantId), createSecretRegistry());
    await other.stage({ stage: 'provision', state: 'started' });
    await other.close();
    // The next owner (as after a restart) writes with the next epoch.
    const epoch = await takeOver(conversation);
    const handed: { after: string; ids: string[] }[] = [];
    const unsubscribe = feed.subscribe(conversation.id, (signal) => {
      if (signal.type === 'events' && signal.committed)
        handed.push({ after: signal.committed.after, ids: signal.committed.rows.map((r) => String(r.id)) });
    });
    const second = writerFor({ ...conversation, epoch }, createSecretRegistry());
    second.output('stdout', Buffer.from('after the restart\n'), turnId);
    await second.close();
    unsubscribe();
    const stored = (await logRows(database.handle.db, conversation.id)).map((r) => String(r.id));
    assert.equal(stored.length, 2);
    assert.deepEqual(handed, [{ after: stored[0], ids: [stored[1]] }]);
  });

  it('never stores a secret printed whole, split at every offset or base64-encoded at each alignment', async () => {
    const secret = 'sk-live-9f8e7d6c5b4a3210';
    const registry = createSecretRegistry();
    registry.register(secret);
    const conversation = await insertConversation(database.handle.db, tenantId);
    const turnId = await insertTurn(database.handle.db, conversation);
    const writer = writerFor(conversation, registry);
    let raw = 0;
    const write = (stream: 'stdout' | 'stderr', text: string | Buffer) => {
      const chunk = Buffer.from(text);
      raw += chunk.length;
      writer.output(stream, chunk, turnId);
    };
    write('stdout', `whole: ${secret}\n`);
    const line = Buffer.from(`TOKEN=${secret}\n`);
    for (let at = 0; at <= line.length; at++) {
      write('stdout', line.subarray(0, at));
      await wait(at % 7 === 0 ? 20 : 0); // some splits straddle a batch boundary too
      write('stdout', line.subarray(at));
    }
    for (const alignment of [0, 1, 2]) {
      const encoded = Buffer.from(`${'x'.repeat(alignment)}${secret}`).toString('base64');
      write('stderr', `b64 ${alignment}: ${encoded}\n`);
      const url = Buffer.from(`${'y'.repeat(alignment)}${secret}`).toString('base64url');
      write('stderr', url.slice(0, 9));
      write('stderr', `${url.slice(9)}\n`);
    }
    await writer.stage({ stage: 'turn', state: 'failed', message: `the agent printed ${secret}`, turnId });
    await writer.close();
    const rows = await logRows(database.handle.db, conversation.id);
    const stored = Buffer.concat(
      rows.map((r) => Buffer.from(`${r.data?.toString() ?? ''}${r.message ?? ''}`)),
    );
    for (const form of secretForms(secret))
      assert.ok(!stored.includes(form), `a form of the secret was stored: ${form.toString().slice(0, 4)}…`);
    const stdout = await storedText(database.handle.db, conversation.id, 'stdout');
    assert.equal(stdout.split(REDACTION_MARKER).length - 1, 1 + line.length + 1);
    for (const text of logs)
      for (const form of secretForms(secret)) assert.ok(!text.includes(form.toString()));
    // Every raw byte handed in is counted once the hold-back ended.
    const counted = await turnBytes(turnId);
    assert.equal(counted.stdout + counted.stderr, raw);
  });

  it('counts the raw bytes of what it stored, not what the redactor holds back', async () => {
    const secret = 'ghp_4aF9qL2xZ8mN1vB7';
    const registry = createSecretRegistry();
    registry.register(secret);
    const conversation = await insertConversation(database.handle.db, tenantId);
    const turnId = await insertTurn(database.handle.db, conversation);
    const writer = writerFor(conversation, registry, { flushIntervalMs: 5 });
    writer.output('stdout', Buffer.from(`hello ${secret.slice(0, 10)}`), turnId);
    // The timer persists what is decided.
    for (let i = 0; i < 100 && (await storedText(database.handle.db, conversation.id, 'stdout')) === ''; i++)
      await wait(50);
    assert.equal(await storedText(database.handle.db, conversation.id, 'stdout'), 'hello ');
    assert.deepEqual(await turnBytes(turnId), { stdout: 6, stderr: 0 });
    writer.output('stdout', Buffer.from(`${secret.slice(10)} bye`), turnId);
    await writer.flush();
    assert.equal(
      await storedText(database.handle.db, conversation.id, 'stdout'),
      `hello ${REDACTION_MARKER} bye`,
    );
    assert.deepEqual(await turnBytes(turnId), { stdout: 6 + secret.length + 4, stderr: 0 });
    // A new turn on the same stream: the old turn's hold-back is counted on the old turn.
    const next = await insertTurn(database.handle.db, conversation, 2);
    writer.output('stdout', Buffer.from('tail ghp_4'), turnId);
    writer.output('stdout', Buffer.from('next\n'), next);
    await writer.close();
    assert.deepEqual(await turnBytes(turnId), { stdout: 6 + secret.length + 4 + 10, stderr: 0 });
    assert.deepEqual(await turnBytes(next), { stdout: 5, stderr: 0 });
    const rows = await logRows(database.handle.db, conversation.id);
    assert.deepEqual(rows.at(-1)?.turn_id, next);
  });

  it('sends output after a quiet spell at once and batches what follows within the interval', async () => {
    const conversation = await insertConversation(database.handle.db, tenantId);
    // An interval no test waits for: the first output must not wait for it, the next one must.
    const writer = writerFor(conversation, createSecretRegistry(), { flushIntervalMs: 60_000 });
    writer.output('stdout', Buffer.from('first\n'));
    for (let i = 0; i < 100 && (await storedText(database.handle.db, conversation.id, 'stdout')) === ''; i++)
      await wait(50);
    assert.equal(await storedText(database.handle.db, conversation.id, 'stdout'), 'first\n');
    writer.output('stdout', Buffer.from('second\n'));
    await wait(200);
    assert.equal(await storedText(database.handle.db, conversation.id, 'stdout'), 'first\n');
    await writer.close();
    assert.equal(await storedText(database.handle.db, conversation.id, 'stdout'), 'first\nsecond\n');
  });

  it('keeps stage rows after the output before them', async () => {
    const conversation = await insertConversation(database.handle.db, tenantId);
    const writer = writerFor(conversation, createSecretRegistry(), { flushIntervalMs: 1000 });
    writer.output('stdout', Buffer.from('cloning'));
    const started = writer.stage({ stage: 'clone', state: 'started' });
    writer.output('stderr', Buffer.from('remote: counting objects'));
    writer.output('stdout', Buffer.from('done\n'));
    const done = writer.stage({ stage: 'clone', state: 'done', durationMs: 12.6 });
    await Promise.all([started, done]);
    await writer.close();
    const rows = await logRows(database.handle.db, conversation.id);
    assert.deepEqual(
      rows.map((r) => (r.stream === 'stage' ? `${r.stage}:${r.state}` : `${r.stream}:${r.data}`)),
      ['stdout:cloning', 'clone:started', 'stderr:remote: counting objects', 'stdout:done\n', 'clone:done'],
    );
    const duration = await database.handle.db
      .selectFrom('log_events')
      .select('duration_ms')
      .where('id', '=', rows.at(-1)!.id)
      .executeTakeFirstOrThrow();
    assert.equal(duration.duration_ms, 13);
  });

  it('answers a stage after close with a rejected promise, never a throw (its callers chain .catch on it)', async () => {
    const conversation = await insertConversation(database.handle.db, tenantId);
    const writer = writerFor(conversation, createSecretRegistry());
    await writer.close();
    let promise: Promise<void> | undefined;
    assert.doesNotThrow(() => {
      promise = writer.stage({ stage: 'packages', state: 'interrupted' });
    });
    await assert.rejects(promise!, /log writer is closed/);
  });

  it('stores stage messages and binary output as given, whatever bytes they hold', async () => {
    const conversation = await insertConversation(database.handle.db, tenantId);
    const writer = writerFor(conversation, createSecretRegistry(), { flushIntervalMs: 1000 });
    const message = 'NULL, {a,"b"} \\ back\\slash\nnew line \'quote\' 日本語 🔑';
    // Every byte value; a final newline so that nothing is held back as a possible character.
    const binary = Buffer.from([...Array.from({ length: 512 }, (_, k) => k % 256), 10]);
    writer.output('stdout', binary);
    writer.output('stderr', Buffer.from('x'));
    const stage = writer.stage({ stage: 'setup', state: 'failed', message });
    writer.output('stdout', Buffer.from('after'));
    await stage;
    await writer.close();
    const rows = await database.handle.db
      .selectFrom('log_events')
      .select(['stream', 'data', 'stage', 'message', 'turn_id'])
      .where('conversation_id', '=', conversation.id)
      .orderBy('id')
      .execute();
    assert.deepEqual(
      rows.map((r) => [
        r.stream,
        r.data === null ? null : Buffer.from(r.data).toString('hex'),
        r.stage,
        r.message,
      ]),
      [
        ['stdout', binary.toString('hex'), null, null],
        ['stderr', Buffer.from('x').toString('hex'), null, null],
        ['stage', null, 'setup', message],
        ['stdout', Buffer.from('after').toString('hex'), null, null],
      ],
    );
    assert.ok(rows.every((r) => r.turn_id === null));
  });

  it('stores turn events in order with the output, redacted', async () => {
    const secret = 'evt"se\\cret-4471-zz';
    const registry = createSecretRegistry();
    registry.register(secret);
    const conversation = await insertConversation(database.handle.db, tenantId);
    const turnId = await insertTurn(database.handle.db, conversation);
    const writer = writerFor(conversation, registry);
    writer.output('stdout', Buffer.from('{"type":"assistant"}\n'), turnId);
    writer.event(turnId, { kind: 'text', text: `using ${secret}` });
    writer.output('stderr', Buffer.from('warn\n'), turnId);
    writer.event(turnId, { kind: 'tool_call', id: 't1', name: 'Bash', input: { command: `echo ${secret}` } });
    await writer.stage({ stage: 'turn', state: 'done', turnId });
    await writer.close();
    const rows = await logRows(database.handle.db, conversation.id);
    assert.deepEqual(
      rows.map((r) => r.stream),
      ['stdout', 'events', 'stderr', 'events', 'stage'],
    );
    const events = rows.filter((r) => r.stream === 'events');
    assert.ok(events.every((r) => r.turn_id === turnId));
    assert.deepEqual(
      events.map((r) => JSON.parse(r.data!.toString())),
      [
        { kind: 'text', text: `using ${REDACTION_MARKER}` },
        { kind: 'tool_call', id: 't1', name: 'Bash', input: { command: `echo ${REDACTION_MARKER}` } },
      ],
    );
    const all = Buffer.concat(rows.map((r) => r.data ?? Buffer.alloc(0))).toString();
    assert.ok(!all.includes(secret) && !all.includes(JSON.stringify(secret).slice(1, -1)));
    // Events count against the budget like output (their JSON bytes).
    const state = await database.handle.db
      .selectFrom('conversations')
      .select('log_bytes')
      .where('id', '=', conversation.id)
      .executeTakeFirstOrThrow();
    assert.equal(Number(state.log_bytes), all.length);
  });

  it('never stores a secret split across streamed text events (a runtime streaming deltas)', async () => {
    const secret = 'sk-delta-77f3a9c1';
    const registry = createSecretRegistry();
    registry.register(secret);
    const conversation = await insertConversation(database.handle.db, tenantId);
    const turnId = await insertTurn(database.handle.db, conversation);
    const writer = writerFor(conversation, registry);
    const said: string[] = [];
    const say = (delta: string) => {
      said.push(delta);
      writer.event(turnId, { kind: 'text', text: delta });
    };
    // Split at every offset into two deltas, then one delta per character.
    for (let at = 1; at < secret.length; at++) {
      say(`key ${secret.slice(0, at)}`);
      say(`${secret.slice(at)} ok. `);
    }
    for (const ch of `and again ${secret}`) say(ch);
    writer.event(turnId, { kind: 'tool_call', name: 'Bash', input: {} });
    say(`tail ${secret.slice(0, 5)}`); // a prefix only, then the turn ends: it is text, not a secret
    await writer.stage({ stage: 'turn', state: 'done', turnId });
    await writer.close();
    const rows = await logRows(database.handle.db, conversation.id);
    const events = rows.filter((r) => r.stream === 'events').map((r) => JSON.parse(r.data!.toString()));
    const texts = events.filter((e) => e.kind === 'text').map((e) => e.text as string);
    const beforeCall = events.findIndex((e) => e.kind === 'tool_call');
    const joined = texts.join('');
    assert.ok(!joined.includes(secret));
    for (const t of texts) assert.ok(!t.includes(secret));
    assert.equal(joined.split(REDACTION_MARKER).length - 1, secret.length);
    assert.equal(
      joined,
      said.join('').replaceAll(secret, REDACTION_MARKER),
      'the text is the same, concatenated',
    );
    assert.ok(
      events.slice(0, beforeCall).every((e) => e.kind === 'text'),
      'the text before the tool call is stored before it',
    );
    assert.equal(
      events.at(-1).text.endsWith(secret.slice(0, 5)),
      true,
      'held-back text comes out by the end of the turn',
    );
    assert.equal(rows.at(-1)?.stage, 'turn');
  });

  it('counts turn events against the budget: one that does not fit is dropped and brings the one marker', async () => {
    const conversation = await insertConversation(database.handle.db, tenantId);
    const turnId = await insertTurn(database.handle.db, conversation);
    const writer = writerFor(conversation, createSecretRegistry(), { outputBudgetMb: 1 });
    const text = 'e'.repeat(20_000);
    // 52 events of ~20 KB: the 53rd byte-wise would pass 1 MiB.
    for (let i = 0; i < 60; i++) writer.event(turnId, { kind: 'text', text });
    writer.output('stdout', Buffer.from('after the budget\n'), turnId);
    await writer.stage({ stage: 'turn', state: 'done', turnId });
    await writer.close();
    const rows = await logRows(database.handle.db, conversation.id);
    const stored = rows.filter((r) => r.stream === 'events');
    const size = Buffer.byteLength(JSON.stringify({ kind: 'text', text }));
    assert.equal(stored.length, Math.floor((1024 * 1024) / size));
    assert.ok(
      stored.every((r) => JSON.parse(r.data!.toString()).text === text),
      'events are never cut',
    );
    assert.deepEqual(
      rows.slice(stored.length).map((r) => `${r.stream}:${r.stage}`),
      ['stage:log', 'stage:turn'],
    );
  });

  it('never splits a character across rows', async () => {
    const conversation = await insertConversation(database.handle.db, tenantId);
    const writer = writerFor(conversation, createSecretRegistry(), { maxRowBytes: 7 });
    const text = 'é€😀a'.repeat(40);
    const bytes = Buffer.from(text);
    for (let at = 0; at < bytes.length; at += 5) writer.output('stdout', bytes.subarray(at, at + 5));
    await writer.close();
    const rows = await logRows(database.handle.db, conversation.id);
    const decoder = new TextDecoder('utf-8', { fatal: true });
    for (const row of rows) {
      assert.ok(row.data!.length <= 7);
      assert.doesNotThrow(() => decoder.decode(row.data!), 'a row is whole characters');
    }
    assert.equal(Buffer.concat(rows.map((r) => r.data!)).toString(), text);
  });

  it('stores output up to the budget, then one marker, across writers', async () => {
    const conversation = await insertConversation(database.handle.db, tenantId);
    const turnId = await insertTurn(database.handle.db, conversation);
    const budget = 1024 * 1024;
    const chunk = Buffer.alloc(100_000, 'a');
    // First wake: 0.6 MB.
    const first = writerFor(conversation, createSecretRegistry(), { outputBudgetMb: 1 });
    for (let i = 0; i < 6; i++) first.output('stdout', chunk, turnId);
    await first.close();
    // Second wake, a new writer (as after a restart): 1.2 MB more, past the budget.
    const second = writerFor(conversation, createSecretRegistry(), { outputBudgetMb: 1 });
    for (let i = 0; i < 12; i++) second.output(i % 2 ? 'stderr' : 'stdout', chunk, turnId);
    await second.stage({ stage: 'turn', state: 'done', turnId });
    await second.close();
    // Third wake: nothing more stored, no second marker.
    const third = writerFor(conversation, createSecretRegistry(), { outputBudgetMb: 1 });
    third.output('stdout', chunk, turnId);
    await third.close();

    const rows = await logRows(database.handle.db, conversation.id);
    const output = rows.filter((r) => r.stream !== 'stage');
    assert.equal(
      output.reduce((n, r) => n + r.data!.length, 0),
      budget,
    );
    const markers = rows.filter((r) => r.stage === 'log');
    assert.equal(markers.length, 1);
    assert.deepEqual([markers[0]!.state, markers[0]!.message], ['failed', truncationMessage(1)]);
    assert.ok(
      rows.indexOf(markers[0]!) > rows.indexOf(output.at(-1)!),
      'the marker follows the last stored byte',
    );
    assert.equal(rows.at(-1)?.stage, 'turn', 'stage rows are still stored');
    const state = await database.handle.db
      .selectFrom('conversations')
      .select(['log_bytes', 'log_truncated'])
      .where('id', '=', conversation.id)
      .executeTakeFirstOrThrow();
    assert.deepEqual([Number(state.log_bytes), state.log_truncated], [budget, true]);
    // Dropped output is still counted raw (reattach stays exact).
    const counted = await turnBytes(turnId);
    assert.equal(counted.stdout + counted.stderr, 19 * chunk.length);
  });

  it('counts the bytes it stored, the budget reached once across writers, and its redactions (metrics)', async () => {
    const conversation = await insertConversation(database.handle.db, tenantId);
    const turnId = await insertTurn(database.handle.db, conversation);
    const metrics = createMetrics();
    const secret = 'metric-s3cret-value-42';
    const registry = createSecretRegistry();
    registry.register(secret);
    const first = writerFor(conversation, registry, { outputBudgetMb: 1, metrics });
    first.output('stdout', Buffer.from(`a ${secret} b\n`), turnId);
    await first.stage({ stage: 'turn', state: 'failed', turnId, message: `no ${secret}` });
    for (let i = 0; i < 12; i++) first.output('stdout', Buffer.alloc(100_000, 'a'), turnId);
    await first.close();
    // A new writer (as after a restart) past the budget: nothing stored, no second budget reached.
    const second = writerFor(conversation, createSecretRegistry(), { outputBudgetMb: 1, metrics });
    second.output('stdout', Buffer.alloc(1000, 'b'), turnId);
    await second.close();

    const state = await database.handle.db
      .selectFrom('conversations')
      .select('log_bytes')
      .where('id', '=', conversation.id)
      .executeTakeFirstOrThrow();
    assert.equal(Number(state.log_bytes), 1024 * 1024);
    assert.equal((await metrics.logBytes.get()).values[0]?.value, 1024 * 1024);
    assert.equal((await metrics.logBudgetReached.get()).values[0]?.value, 1);
    // The output's occurrence and the stage message's.
    assert.equal((await metrics.logRedactions.get()).values[0]?.value, 2);
  });

  it('stores everything when the budget is 0', async () => {
    const conversation = await insertConversation(database.handle.db, tenantId);
    const writer = writerFor(conversation, createSecretRegistry(), { outputBudgetMb: 0 });
    const chunk = Buffer.alloc(200_000, 'b');
    for (let i = 0; i < 6; i++) writer.output('stdout', chunk);
    await writer.close();
    const rows = await logRows(database.handle.db, conversation.id);
    assert.equal(
      rows.reduce((n, r) => n + (r.data?.length ?? 0), 0),
      6 * chunk.length,
    );
    assert.ok(!rows.some((r) => r.stage === 'log'));
  });

  it('is fenced off once the epoch moves on: the next batch writes nothing and fails with StaleOwnerError', async () => {
    const conversation = await insertConversation(database.handle.db, tenantId);
    const turnId = await insertTurn(database.handle.db, conversation);
    const writer = writerFor(conversation, createSecretRegistry());
    writer.output('stdout', Buffer.from('before takeover\n'), turnId);
    await writer.flush();
    await takeOver(conversation);
    writer.output('stdout', Buffer.from('after takeover\n'), turnId);
    const failure = await writer.failed;
    assert.ok(failure instanceof StaleOwnerError);
    await assert.rejects(writer.stage({ stage: 'turn', state: 'done' }), StaleOwnerError);
    await assert.rejects(writer.close(), StaleOwnerError);
    const rows = await logRows(database.handle.db, conversation.id);
    assert.deepEqual(
      rows.map((r) => r.data?.toString()),
      ['before takeover\n'],
    );
    assert.deepEqual(await turnBytes(turnId), { stdout: 16, stderr: 0 });
    const state = await database.handle.db
      .selectFrom('conversations')
      .select('log_bytes')
      .where('id', '=', conversation.id)
      .executeTakeFirstOrThrow();
    assert.equal(Number(state.log_bytes), 16);
  });

  it('is fenced off from its first batch when it never held the epoch', async () => {
    const conversation = await insertConversation(database.handle.db, tenantId, { epoch: 5 });
    const writer = writerFor({ ...conversation, epoch: '4' }, createSecretRegistry());
    await assert.rejects(writer.stage({ stage: 'provision', state: 'started' }), StaleOwnerError);
    assert.ok((await writer.failed) instanceof StaleOwnerError);
    assert.deepEqual(await logRows(database.handle.db, conversation.id), []);
  });
});
