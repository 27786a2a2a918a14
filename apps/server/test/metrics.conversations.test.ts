// The conversation engine's metrics, counted where it happens (observability/metrics.ts): a
// real sandboxd, the real app and engine with the scripted runtime (the prompt is the turn's
// shell script). A turn's start, end and first output by runtime; the provisioning stages by
// outcome; the log bytes stored and the redactions applied; a takeover of an orphan.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { Metrics } from '../src/observability/metrics.ts';
import { type ConversationHarness, startConversationHarness, waitUntil } from './helpers/conversations.ts';

const SECRET = 'metric-Secret-5b4a3c2d1e';
/** The runtime the harness's agents name (mapped to the scripted runtime). */
const RUNTIME = 'claude';

let h: ConversationHarness;
before(async () => {
  h = await startConversationHarness();
});
after(async () => {
  await h?.close();
});

/** The value of a counter or a gauge series, 0 when it was never set. */
async function value(
  metric: { get(): Promise<{ values: Array<{ labels: object; value: number }> }> },
  labels = {},
) {
  const { values } = await metric.get();
  const want = Object.entries(labels);
  return values
    .filter((v) => want.every(([k, x]) => (v.labels as Record<string, unknown>)[k] === x))
    .reduce((sum, v) => sum + v.value, 0);
}

/** A histogram's observation count for the labels given. */
async function observations(
  metric: Metrics['provisioningStageDuration'] | Metrics['turnFirstOutput'],
  labels: object,
) {
  const { values } = await metric.get();
  const want = Object.entries(labels);
  const count = values.find(
    (v) =>
      v.metricName?.endsWith('_count') &&
      want.every(([k, x]) => (v.labels as Record<string, unknown>)[k] === x),
  );
  return count?.value ?? 0;
}

describe('conversation metrics', () => {
  it("counts a turn's start, end and first output, the provisioning stages, the log bytes and redactions", async () => {
    const m = h.deps.metrics;
    const user = await h.user();
    const vault = await h.vault(user);
    assert.equal(
      (await h.api(user, 'POST', `/api/vaults/${vault}/secrets`, { key: 'TOKEN', value: SECRET })).status,
      201,
    );
    const agent = await h.agent(user, { vault_ids: [vault] });
    const bytesBefore = await value(m.logBytes);
    const redactionsBefore = await value(m.logRedactions);

    const conv = await h.start(user, { agent_id: agent, vault_id: vault, prompt: 'echo "token=$TOKEN"' });
    await h.waitFor(user, conv.id, (c) => c.status === 'idle', 60_000);
    assert.equal(await h.stdout(conv.id), 'token=[REDACTED]\n');

    assert.equal(await value(m.turnsStarted, { runtime: RUNTIME }), 1);
    assert.equal(await value(m.turnsFinished, { runtime: RUNTIME, outcome: 'succeeded' }), 1);
    assert.equal(await observations(m.turnFirstOutput, { runtime: RUNTIME }), 1);
    assert.equal(await observations(m.provisioningStageDuration, { stage: 'provision', outcome: 'done' }), 1);
    assert.equal(await observations(m.provisioningStageDuration, { outcome: 'failed' }), 0);
    // The stored output (the redacted line), and at least its one redaction.
    assert.ok((await value(m.logBytes)) - bytesBefore >= 'token=[REDACTED]\n'.length);
    assert.ok((await value(m.logRedactions)) - redactionsBefore >= 1);

    // A failing turn counts as finished, failed.
    assert.equal(
      (await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, { prompt: 'exit 3' })).status,
      202,
    );
    assert.equal((await h.waitForTurn(user, conv.id, 2)).status, 'failed');
    assert.equal(await value(m.turnsStarted, { runtime: RUNTIME }), 2);
    assert.equal(await value(m.turnsFinished, { runtime: RUNTIME, outcome: 'failed' }), 1);
    // No output: no first-output observation.
    assert.equal(await observations(m.turnFirstOutput, { runtime: RUNTIME }), 1);

    // The scrape-time gauge sees the warm sandbox (cluster-wide, from the database).
    const exposition = await m.registry.metrics();
    assert.match(exposition, /^paddock_live_sandboxes\{status="ready"\} [1-9]/m);
    assert.match(exposition, /^paddock_ready 1$/m);
  });

  it('counts a takeover of an orphan, not the first ownership of a conversation', async () => {
    const user = await h.user();
    const agent = await h.agent(user);
    const conv = await h.start(user, { agent_id: agent, prompt: 'echo kept' });
    await h.waitFor(user, conv.id, (c) => c.status === 'idle', 60_000);
    const b = await h.secondInstance();
    try {
      const takeovers = async () =>
        (await value(h.deps.metrics.ownerTakeovers)) + (await value(b.deps.metrics.ownerTakeovers));
      assert.equal(await takeovers(), 0, 'owning a new conversation is no takeover');
      // Cut the owner's dedicated connection (the one holding the lock): the warm sandbox is an orphan.
      const lost = new Promise<void>((resolve) => h.deps.ownership.onLost(resolve));
      await h.database.handle.pool.query(
        `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted
           AND objid = (hashtextextended('paddock:conversation:' || $1::text, 0) & 4294967295)::oid`,
        [conv.id],
      );
      await lost;
      // One process's orphan probe (every 2 s) takes it over: the re-connected first or the second.
      // (Every conversation the first one owned is an orphan now: the earlier test's too.)
      await waitUntil(async () => h.deps.ownership.holds(conv.id) || b.deps.ownership.holds(conv.id), 30_000);
      await waitUntil(async () => (await takeovers()) >= 1, 10_000);
    } finally {
      await b.close();
    }
  });
});
