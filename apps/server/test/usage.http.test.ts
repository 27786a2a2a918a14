// The usage meter against a real PostgreSQL (issue 38 item 7): the events the triggers of
// migration 0029 write as sandbox and turn rows end, and GET /api/account/usage and
// GET /api/admin/users/:id/usage over HTTP. The rows end through plain UPDATEs, as every path
// of the service ends them (the owner, a terminate request, the provisioner); the end-to-end
// story with a real sandbox and a real agent CLI is usage.e2e.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import { auditRows } from './helpers/accounts.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { type ConversationRow, insertConversation, insertTurn } from './helpers/conversation-rows.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';

let t: TestApp;
before(async () => {
  t = await buildTestApp();
});
after(async () => {
  await t.close();
});

const at = (base: Date, seconds: number) => new Date(base.getTime() + seconds * 1000);

async function insertSandbox(conv: ConversationRow, createdAt: Date, readyAt: Date | null): Promise<string> {
  const id = uuidv7();
  await t.deps.db
    .insertInto('sandboxes')
    .values({
      id,
      tenant_id: conv.tenantId,
      conversation_id: conv.id,
      name: `service-test-${id.slice(-8)}`,
      status: readyAt ? 'ready' : 'starting',
      created_at: createdAt,
      ready_at: readyAt,
    })
    .execute();
  return id;
}

async function runTurn(
  conv: ConversationRow,
  sandboxId: string,
  seq: number,
  startedAt: Date,
  endedAt: Date | null,
  usage: Record<string, number> | null = null,
): Promise<string> {
  const id = await insertTurn(t.deps.db, conv, seq);
  await t.deps.db
    .updateTable('turns')
    .set({ sandbox_id: sandboxId, started_at: startedAt })
    .where('id', '=', id)
    .execute();
  if (endedAt) await endTurn(id, endedAt, usage);
  return id;
}

async function endTurn(id: string, endedAt: Date, usage: Record<string, number> | null = null) {
  await t.deps.db
    .updateTable('turns')
    .set({ status: 'succeeded', ended_at: endedAt, ...(usage ? { usage: JSON.stringify(usage) } : {}) })
    .where('id', '=', id)
    .execute();
}

async function endSandbox(id: string, status: 'terminated' | 'failed', endedAt: Date, reason: string) {
  await t.deps.db
    .updateTable('sandboxes')
    .set({ status, reason, ended_at: endedAt, updated_at: endedAt })
    .where('id', '=', id)
    .execute();
}

async function events(subjectId: string) {
  return await t.deps.db.selectFrom('usage_events').selectAll().where('subject_id', '=', subjectId).execute();
}

async function usage(user: TestUser, query = '') {
  return await t.app.inject({ url: `/api/account/usage${query}`, headers: user.auth });
}

/** A sandbox ready for an hour with a 5-minute turn that ended 5 minutes before the sandbox at `end`. */
async function hourOfUse(user: TestUser, end: Date, tokens: { input: number; output: number; cost: number }) {
  const conv = await insertConversation(t.deps.db, user.id);
  const start = at(end, -3660);
  const sandbox = await insertSandbox(conv, start, at(start, 60));
  await runTurn(conv, sandbox, 1, at(end, -600), at(end, -300), {
    input_tokens: tokens.input,
    output_tokens: tokens.output,
    cost_usd: tokens.cost,
  });
  await endSandbox(sandbox, 'terminated', end, 'idle timeout');
  return { conv, sandbox };
}

describe('usage events', () => {
  it('a sandbox lifetime is one event: busy while its turns ran, parked while ready and idle; each turn one event with its tokens', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const conv = await insertConversation(t.deps.db, user.id);
    const t0 = new Date('2026-03-10T08:00:00Z');
    const sandbox = await insertSandbox(conv, t0, at(t0, 60));
    const first = await runTurn(conv, sandbox, 1, at(t0, 100), at(t0, 400), {
      input_tokens: 1200,
      output_tokens: 300,
      cache_read_tokens: 50,
      cost_usd: 0.0125,
    });
    // Still running as the sandbox ends (a terminate): counted until the sandbox's end.
    const second = await runTurn(conv, sandbox, 2, at(t0, 3000), null);
    await endSandbox(sandbox, 'terminated', at(t0, 3660), 'terminated');
    await endTurn(second, at(t0, 3700));

    const [row] = await events(sandbox);
    assert.ok(row, 'a sandbox event');
    assert.equal(row.kind, 'sandbox');
    assert.equal(row.tenant_id, user.id);
    assert.equal(row.conversation_id, conv.id);
    assert.equal(row.status, 'terminated');
    assert.equal(row.reason, 'terminated');
    assert.equal(row.started_at.toISOString(), t0.toISOString());
    assert.equal(row.ready_at?.toISOString(), at(t0, 60).toISOString());
    assert.equal(row.ended_at.toISOString(), at(t0, 3660).toISOString());
    // Ready for 3600 s: 300 s of the first turn, 660 s of the second until the sandbox ended.
    assert.equal(row.busy_seconds, 960);
    assert.equal(row.parked_seconds, 2640);

    const [turn] = await events(first);
    assert.equal(turn?.kind, 'turn');
    assert.equal(turn?.sandbox_id, sandbox);
    assert.equal(turn?.status, 'succeeded');
    assert.equal(turn?.busy_seconds, 300);
    assert.deepEqual(
      [turn?.input_tokens, turn?.output_tokens, turn?.cache_read_tokens, Number(turn?.cost_usd)],
      [1200, 300, 50, 0.0125],
    );
    const [open] = await events(second);
    assert.equal(open?.input_tokens, null, 'no usage reported, none recorded');
    assert.equal(open?.cost_usd, null);
  });

  it('figures a runtime reported out of range never stop the turn from ending: they are recorded as not reported', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const conv = await insertConversation(t.deps.db, user.id);
    const t0 = new Date('2026-03-10T09:00:00Z');
    const sandbox = await insertSandbox(conv, t0, t0);
    // The agent CLI's output is the sandbox's to write: a usage line can say anything a double can.
    const turn = await runTurn(conv, sandbox, 1, t0, at(t0, 10), {
      input_tokens: 1e300,
      output_tokens: -5,
      cache_read_tokens: 12.6,
      cost_usd: 1e300,
    });
    const [ended] = await t.deps.db.selectFrom('turns').select('status').where('id', '=', turn).execute();
    assert.equal(ended?.status, 'succeeded');
    const [row] = await events(turn);
    assert.deepEqual(
      [row?.input_tokens, row?.output_tokens, row?.cache_read_tokens, row?.cost_usd],
      [null, null, 13, null],
    );
  });

  it('a sandbox that fails before ready is an event with no busy or parked time', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const conv = await insertConversation(t.deps.db, user.id);
    const t0 = new Date('2026-03-11T08:00:00Z');
    const sandbox = await insertSandbox(conv, t0, null);
    await endSandbox(sandbox, 'failed', at(t0, 45), 'setup script exited with status 1');
    const rows = await events(sandbox);
    assert.equal(rows.length, 1);
    assert.equal(rows[0]?.status, 'failed');
    assert.equal(rows[0]?.reason, 'setup script exited with status 1');
    assert.equal(rows[0]?.ready_at, null);
    assert.deepEqual([rows[0]?.busy_seconds, rows[0]?.parked_seconds], [0, 0]);
  });

  it('an end written again, or metered again, never counts twice', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const { sandbox } = await hourOfUse(user, new Date('2026-03-12T10:00:00Z'), {
      input: 1,
      output: 1,
      cost: 0,
    });
    // The same end written again (a retried terminate), and the meter itself run again.
    await endSandbox(sandbox, 'terminated', new Date('2026-03-12T11:00:00Z'), 'terminated');
    await sql`SELECT usage_record_sandbox(${sandbox}::uuid)`.execute(t.deps.db);
    const rows = await events(sandbox);
    assert.equal(rows.length, 1);
    assert.equal(rows[0]?.ended_at.toISOString(), '2026-03-12T10:00:00.000Z', 'the first end stands');
  });

  it('a turn that never started is no event', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const conv = await insertConversation(t.deps.db, user.id);
    const turn = await insertTurn(t.deps.db, conv, 1);
    await t.deps.db
      .updateTable('turns')
      .set({ status: 'queued', started_at: null })
      .where('id', '=', turn)
      .execute();
    await t.deps.db
      .updateTable('turns')
      .set({ status: 'interrupted', ended_at: new Date() })
      .where('id', '=', turn)
      .execute();
    assert.equal((await events(turn)).length, 0);
  });

  it('deleting the account deletes its usage events; deleting a conversation keeps them', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const { conv, sandbox } = await hourOfUse(user, new Date('2026-03-13T10:00:00Z'), {
      input: 1,
      output: 1,
      cost: 0,
    });
    await t.deps.db.deleteFrom('conversations').where('id', '=', conv.id).execute();
    assert.equal((await events(sandbox)).length, 1);
    await t.deps.db.deleteFrom('users').where('id', '=', user.id).execute();
    const left = await t.deps.db
      .selectFrom('usage_events')
      .select('id')
      .where('tenant_id', '=', user.id)
      .execute();
    assert.equal(left.length, 0);
  });
});

describe('GET /api/account/usage', () => {
  it('sums the events that ended in [from, to): sandbox time busy and parked, turns, tokens, cost, per model', async () => {
    const user = await createVerifiedUser(t.deps.db);
    // An event counts in the range its end falls in: the first turn ends at `from` exactly (in),
    // the last sandbox after `to` and its turn at `to` exactly (both out).
    await hourOfUse(user, new Date('2026-04-01T00:05:00Z'), { input: 100, output: 10, cost: 0.5 });
    await hourOfUse(user, new Date('2026-04-30T23:59:59Z'), { input: 200, output: 20, cost: 0.25 });
    await hourOfUse(user, new Date('2026-05-01T00:05:00Z'), { input: 400, output: 40, cost: 1 });
    const conv = await insertConversation(t.deps.db, user.id);
    const failed = await insertSandbox(conv, new Date('2026-04-15T00:00:00Z'), null);
    await endSandbox(failed, 'failed', new Date('2026-04-15T00:01:00Z'), 'clone failed');

    const res = await usage(user, '?from=2026-04-01&to=2026-05-01');
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json(), {
      from: '2026-04-01T00:00:00.000Z',
      to: '2026-05-01T00:00:00.000Z',
      sandboxes: { count: 3, failed_before_ready: 1, busy_seconds: 600, parked_seconds: 6600 },
      turns: { count: 2, input_tokens: 300, output_tokens: 30, cache_read_tokens: 0, cost_usd: 0.75 },
      by_model: [
        {
          runtime: null,
          model: null,
          turns: 2,
          input_tokens: 300,
          output_tokens: 30,
          cache_read_tokens: 0,
          cost_usd: 0.75,
        },
      ],
    });
    // A date-time with an offset: 2026-05-01T02:00+02:00 is midnight UTC, the third sandbox's end.
    const may = (
      await usage(user, `?from=${encodeURIComponent('2026-05-01T02:00:00+02:00')}&to=2026-05-02`)
    ).json();
    assert.equal(may.sandboxes.count, 1);
    assert.equal(may.turns.input_tokens, 400);
  });

  it('defaults to this month (UTC)', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const now = new Date();
    await hourOfUse(user, now, { input: 7, output: 3, cost: 0.01 });
    await hourOfUse(user, new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1) - 1000), {
      input: 1000,
      output: 1000,
      cost: 1,
    });
    const res = await usage(user);
    assert.equal(res.statusCode, 200, res.body);
    const body = res.json();
    assert.equal(body.from, new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString());
    assert.equal(body.to, new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)).toISOString());
    assert.deepEqual([body.sandboxes.count, body.turns.count, body.turns.input_tokens], [1, 1, 7]);
  });

  it('with one bound, the month it falls in', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const range = async (query: string) => {
      const body = (await usage(user, query)).json();
      return [body.from, body.to];
    };
    assert.deepEqual(await range('?from=2026-11-15'), [
      '2026-11-15T00:00:00.000Z',
      '2026-12-01T00:00:00.000Z',
    ]);
    assert.deepEqual(await range('?to=2026-12-01'), ['2026-11-01T00:00:00.000Z', '2026-12-01T00:00:00.000Z']);
    assert.deepEqual(await range('?to=2026-12-10'), ['2026-12-01T00:00:00.000Z', '2026-12-10T00:00:00.000Z']);
  });

  it('an empty range is zeros, with no cost rather than a cost of 0', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const body = (await usage(user, '?from=2020-01-01&to=2020-02-01')).json();
    assert.deepEqual(body.sandboxes, {
      count: 0,
      failed_before_ready: 0,
      busy_seconds: 0,
      parked_seconds: 0,
    });
    assert.deepEqual(body.turns, {
      count: 0,
      input_tokens: 0,
      output_tokens: 0,
      cache_read_tokens: 0,
      cost_usd: null,
    });
    assert.deepEqual(body.by_model, []);
  });

  it('refuses a range that is not ISO dates, not from < to, or longer than 366 days with a 400 naming the parameter', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const cases: [string, string, RegExp][] = [
      ['?from=yesterday', 'from', /from is not an ISO 8601 date/],
      ['?to=2026-02-30', 'to', /to is not an ISO 8601 date/],
      ['?from=2026-13-01', 'from', /not an ISO 8601 date/],
      ['?from=2026-01-01T25:00:00Z', 'from', /not an ISO 8601 date/],
      ['?from=', 'from', /not an ISO 8601 date/],
      ['?from=2026-05-01&to=2026-04-01', 'to', /from must be before to/],
      ['?from=2026-05-01&to=2026-05-01', 'to', /from must be before to/],
      ['?from=2025-01-01&to=2026-01-03', 'to', /longer than 366 days/],
    ];
    for (const [query, field, message] of cases) {
      const res = await usage(user, query);
      assert.equal(res.statusCode, 400, `${query}: ${res.body}`);
      const body = res.json();
      assert.equal(body.error, 'invalid_query', query);
      assert.match(body.message, message, query);
      assert.ok(body.errors[field], `${query} names ${field}: ${res.body}`);
      assert.ok(!res.body.includes(' at '), 'no stack trace');
    }
    // A leap year from Jan 1 to Jan 1 is within the bound.
    assert.equal((await usage(user, '?from=2028-01-01&to=2029-01-01')).statusCode, 200);
  });

  it('is tenant-scoped: another account’s usage never shows and a request without a key is 401', async () => {
    const alice = await createVerifiedUser(t.deps.db);
    const bob = await createVerifiedUser(t.deps.db);
    await hourOfUse(alice, new Date('2026-06-10T00:00:00Z'), { input: 5, output: 5, cost: 0.1 });
    const range = '?from=2026-06-01&to=2026-07-01';
    assert.equal((await usage(alice, range)).json().turns.count, 1);
    const theirs = (await usage(bob, range)).json();
    assert.deepEqual([theirs.sandboxes.count, theirs.turns.count], [0, 0]);
    const anonymous = await t.app.inject({ url: `/api/account/usage${range}` });
    assert.equal(anonymous.statusCode, 401);
  });
});

describe('GET /api/admin/users/:id/usage', () => {
  it("shows an admin one account's usage, audited; a non-admin is refused and an unknown id is 404", async () => {
    const admin = await createVerifiedUser(t.deps.db, { isAdmin: true });
    const user = await createVerifiedUser(t.deps.db);
    await hourOfUse(user, new Date('2026-07-10T00:00:00Z'), { input: 9, output: 1, cost: 0.2 });
    const range = '?from=2026-07-01&to=2026-08-01';
    const res = await t.app.inject({ url: `/api/admin/users/${user.id}/usage${range}`, headers: admin.auth });
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual([res.json().turns.count, res.json().turns.input_tokens], [1, 9]);
    const audited = (await auditRows(t, 'admin.usage.read')).filter((r) => r.tenant_id === admin.id);
    assert.deepEqual(audited.at(-1)?.metadata, {
      target_user_id: user.id,
      from: '2026-07-01T00:00:00.000Z',
      to: '2026-08-01T00:00:00.000Z',
    });

    const refused = await t.app.inject({ url: `/api/admin/users/${admin.id}/usage`, headers: user.auth });
    assert.equal(refused.statusCode, 403);
    for (const id of [uuidv7(), 'not-a-uuid']) {
      const missing = await t.app.inject({ url: `/api/admin/users/${id}/usage`, headers: admin.auth });
      assert.equal(missing.statusCode, 404, id);
    }
    const bad = await t.app.inject({ url: `/api/admin/users/${user.id}/usage?to=x`, headers: admin.auth });
    assert.equal(bad.statusCode, 400);
  });
});
