// The sandbox reaper (hourly at :07): reconciles the sandbox rows against the backend's own
// listing, the backstop for what a conversation server did not finish (it died, nobody adopted
// its conversation, a destroy was lost).
//
// What must hold (upkeep.reaper.test.ts, against the real sandboxd):
// 1. It lists every backend sandbox, every page. A listing that fails on any page acts on
//    nothing at all (no row freed, nothing destroyed, the untracked report left as it was) and
//    says so: a partial listing would make live sandboxes look untracked and rows look orphaned.
// 2. The rows are read after the listing: a sandbox's row is written before its backend create
//    (and a checkpoint build owes its destroy first, destroy-queue.ts), so nothing the listing
//    saw can be missing from the rows for being too new.
// 3. A backend sandbox whose row is terminal (`terminated`, `failed`) is destroyed, through the
//    destroy queue (a failed destroy is retried by it until confirmed).
// 4. A live row (pending, starting, ready) is acted on only past a bound, and only when no
//    conversation server holds its conversation: the reaper takes the conversation's ownership
//    itself (owner.ts; the epoch bump fences a paused old owner) and re-reads the rows under it.
//    A conversation a server holds is that server's to bound (lifecycle.ts checks each minute).
//    - Stuck mid-provision past the provision deadline (from the row's creation): the rows are
//      failed as the server's watchdog fails them (sandbox `failed`, open turns failed, the
//      conversation `failed` if pending or running), the callback key revoked, the sandbox
//      destroyed.
//    - Ready and abandoned, past the idle timeout (from last activity, the conversation idle) or
//      the max lifetime (from creation): sandbox `terminated`, the conversation stays idle and
//      resumable, the callback key revoked, the sandbox destroyed. Bounds of 0 are off, as for
//      the servers. A sandbox whose runtime session is unsaved (a turn ended after the last save)
//      is kept: reclaiming it would lose the session; the next server to adopt it saves first.
// 5. A backend sandbox no row (and no owed destroy) knows is reported, never destroyed: a line,
//    a log warning, the paddock_untracked_sandboxes gauge and the admin page (untracked_sandboxes).
// 6. Time is `now` only; `dryRun` takes no ownership, writes nothing and destroys nothing.
import type { Deps } from '../../deps.ts';
import type { JobResult, JobRunContext, ScheduledJob } from '../../jobs/scheduled-job.ts';
import type { OwnerLease } from '../contracts.ts';
import type { SandboxStatus } from '../conversations.tables.ts';
import {
  ownerFailOpenTurns,
  ownerLiveSandbox,
  ownerLoadConversation,
  ownerSessionBehind,
  ownerSetConversation,
  ownerSetSandbox,
} from './owner-writes.repo.ts';

const LIVE: SandboxStatus[] = ['pending', 'starting', 'ready'];
const TERMINAL: SandboxStatus[] = ['terminated', 'failed'];

const errorText = (err: unknown): string => (err instanceof Error ? err.message : String(err)).slice(0, 300);

interface LiveRow {
  id: string;
  tenant_id: string;
  conversation_id: string;
  name: string;
  status: SandboxStatus;
  created_at: Date;
}

/** Why a live row is out of its bounds at `now`, or null when it is within them. */
function outOfBounds(
  lifecycle: Deps['lifecycle'],
  now: Date,
  sandbox: { status: SandboxStatus; created_at: Date },
  conversation: { status: string; last_activity_at: Date },
): { kind: 'stuck' | 'expired'; message: string } | null {
  const age = now.getTime() - sandbox.created_at.getTime();
  if (sandbox.status !== 'ready') {
    if (age <= lifecycle.provisionDeadlineMs) return null;
    const minutes = Math.round(lifecycle.provisionDeadlineMs / 60_000);
    return { kind: 'stuck', message: `provisioning did not finish within ${minutes} minutes` };
  }
  if (conversation.status !== 'idle') return null;
  if (lifecycle.maxLifetimeHours > 0 && age > lifecycle.maxLifetimeHours * 3_600_000) {
    return {
      kind: 'expired',
      message: `the sandbox reached its maximum lifetime of ${lifecycle.maxLifetimeHours} hours`,
    };
  }
  const idle = now.getTime() - conversation.last_activity_at.getTime();
  if (lifecycle.idleTimeoutMinutes > 0 && idle > lifecycle.idleTimeoutMinutes * 60_000) {
    return { kind: 'expired', message: `the sandbox was idle for ${lifecycle.idleTimeoutMinutes} minutes` };
  }
  return null;
}

async function reap(ctx: JobRunContext): Promise<JobResult> {
  const { deps, now, dryRun, print } = ctx;
  const { db } = deps;
  const log = deps.logger.child({ component: 'jobs', job: 'sandbox-reaper' });

  // Without a backend no sandbox exists, and every conversation already fails to provision.
  if (!deps.config.sandbox.baseUrl) {
    print('no sandbox backend is configured (SANDBOX_BASE_URL): nothing to reconcile');
    return { acted: 0, failures: 0, summary: 'no sandbox backend is configured: nothing to reconcile' };
  }

  let listed: string[];
  try {
    listed = (await deps.sandbox.list({ retry: true })).map((s) => s.name);
  } catch (err) {
    const reason = errorText(err);
    print(`the backend listing failed (${reason}): acting on nothing`);
    log.error({ err: reason }, 'sandbox reaper: the backend listing failed; it acted on nothing');
    return { acted: 0, failures: 1, summary: 'the backend listing failed: acted on nothing' };
  }

  const known = listed.length
    ? await db
        .selectFrom('sandboxes')
        .select(['name', 'status', 'tenant_id'])
        .where('name', 'in', listed)
        .execute()
    : [];
  const owed = listed.length
    ? await db.selectFrom('sandbox_destroys').select('name').where('name', 'in', listed).execute()
    : [];
  const live = await db
    .selectFrom('sandboxes as s')
    .innerJoin('conversations as c', 'c.id', 's.conversation_id')
    .select([
      's.id',
      's.tenant_id',
      's.conversation_id',
      's.name',
      's.status',
      's.created_at',
      'c.status as conversation_status',
      'c.last_activity_at',
    ])
    .where('s.status', 'in', LIVE)
    .orderBy('s.created_at')
    .execute();

  let destroyed = 0;
  let freed = 0;
  let expired = 0;
  let failures = 0;

  // Invariant 3: terminal rows whose sandbox the backend still runs.
  for (const row of known) {
    if (!TERMINAL.includes(row.status)) continue;
    if (dryRun) {
      print(`would destroy ${row.name}: its row is ${row.status}`);
      destroyed += 1;
      continue;
    }
    if (await deps.destroys.destroy(row.tenant_id, row.name)) {
      print(`destroyed ${row.name}: its row is ${row.status}`);
      destroyed += 1;
    } else {
      print(`failed to destroy ${row.name} (its row is ${row.status}): queued for a retry`);
      failures += 1;
    }
  }

  // Invariant 4: live rows past a bound, whose conversation no server holds.
  for (const row of live) {
    const bound = outOfBounds(deps.lifecycle, now, row, {
      status: row.conversation_status,
      last_activity_at: row.last_activity_at,
    });
    if (!bound) continue;
    try {
      const outcome = dryRun ? await judgeDry(deps, row, bound) : await act(deps, now, row);
      if (outcome === null) continue;
      print(`${dryRun ? `would ${outcome.verb}` : PAST[outcome.verb]} ${row.name}: ${outcome.message}`);
      if (outcome.verb === 'free') freed += 1;
      else if (outcome.verb === 'expire') expired += 1;
    } catch (err) {
      failures += 1;
      print(`failed on ${row.name}: ${errorText(err)}`);
      log.warn({ sandbox: row.name, err: errorText(err) }, 'sandbox reaper: acting on a live row failed');
    }
  }

  // Invariant 5: report, never destroy.
  const knownNames = new Set([...known.map((r) => r.name), ...owed.map((r) => r.name)]);
  const untracked = listed.filter((name) => !knownNames.has(name)).sort();
  for (const name of untracked) {
    print(`untracked ${name}: no row knows it; kept (reported only)`);
    log.warn({ sandbox: name }, 'sandbox reaper: a backend sandbox no row knows (reported, kept)');
  }
  if (!dryRun) {
    await db.transaction().execute(async (trx) => {
      const q = trx.deleteFrom('untracked_sandboxes');
      await (untracked.length ? q.where('name', 'not in', untracked) : q).execute();
      if (untracked.length) {
        await trx
          .insertInto('untracked_sandboxes')
          .values(untracked.map((name) => ({ name, first_seen_at: now, last_seen_at: now })))
          .onConflict((oc) => oc.column('name').doUpdateSet({ last_seen_at: now }))
          .execute();
      }
    });
    deps.metrics.untrackedSandboxes.set(untracked.length);
  }

  if (!dryRun) {
    deps.metrics.reaperActions.inc({ action: 'destroyed' }, destroyed);
    deps.metrics.reaperActions.inc({ action: 'freed' }, freed);
    deps.metrics.reaperActions.inc({ action: 'expired' }, expired);
  }
  const summary =
    (dryRun
      ? `would destroy ${destroyed}, free ${freed}, expire ${expired} sandbox(es) `
      : `destroyed ${destroyed}, freed ${freed}, expired ${expired} sandbox(es) `) +
    `of ${listed.length} listed; ${untracked.length} untracked (reported, kept)` +
    (failures ? `; ${failures} failed` : '');
  return { acted: destroyed + freed + expired, failures, summary };
}

type Outcome = { verb: 'free' | 'expire' | 'keep'; message: string } | null;
const PAST = { free: 'freed', expire: 'expired', keep: 'kept' } as const;

/** Invariant 4: reclaiming a sandbox whose runtime session is unsaved would lose the session. */
const keep = (message: string): Outcome => ({
  verb: 'keep',
  message: `${message}, but its runtime session is unsaved: kept for the next server to adopt it, which saves first`,
});

/** Dry run: what act() would do, from the probe alone (no ownership taken, nothing written). */
async function judgeDry(
  deps: Deps,
  row: LiveRow,
  bound: { kind: 'stuck' | 'expired'; message: string },
): Promise<Outcome> {
  if (await deps.ownershipProbe.isOwned(row.conversation_id)) return null;
  if (bound.kind === 'stuck') return { verb: 'free', message: bound.message };
  // A read only: ownerSessionBehind checks no epoch.
  const lease = { tenantId: row.tenant_id, conversationId: row.conversation_id, epoch: '' };
  if ((await ownerSessionBehind(deps.db, lease)).behind) return keep(bound.message);
  return { verb: 'expire', message: bound.message };
}

/** Invariant 4 under the conversation's ownership: null when a server holds it or the row moved on. */
async function act(deps: Deps, now: Date, row: LiveRow): Promise<Outcome> {
  const acquired = await deps.ownership.tryAcquire(row.tenant_id, row.conversation_id);
  if (!acquired) return null;
  const lease: OwnerLease = {
    tenantId: acquired.tenantId,
    conversationId: acquired.conversationId,
    epoch: acquired.epoch,
  };
  try {
    const { db } = deps;
    const sandbox = await ownerLiveSandbox(db, lease);
    if (!sandbox || sandbox.id !== row.id) return null;
    const conversation = await ownerLoadConversation(db, lease);
    const bound = outOfBounds(deps.lifecycle, now, sandbox, conversation);
    if (!bound) return null;
    if (bound.kind === 'stuck') {
      await ownerSetSandbox(db, lease, sandbox.id, 'failed', bound.message);
      await ownerFailOpenTurns(db, lease, 'failed', bound.message);
      await ownerSetConversation(
        db,
        lease,
        { status: 'failed', failureReason: bound.message },
        { onlyIf: ['pending', 'running'] },
      );
    } else {
      if ((await ownerSessionBehind(db, lease)).behind) return keep(bound.message);
      await ownerSetSandbox(db, lease, sandbox.id, 'terminated', bound.message);
    }
    await deps.apiKeys.revokeConversationKeys(lease.conversationId);
    await deps.destroys.destroy(lease.tenantId, sandbox.name);
    return { verb: bound.kind === 'stuck' ? 'free' : 'expire', message: bound.message };
  } finally {
    await deps.ownership.release(lease.conversationId);
  }
}

export const sandboxReaperJob: ScheduledJob = {
  name: 'sandbox-reaper',
  description:
    'Reconciles sandbox rows with the backend: frees stuck provisions, expires abandoned sandboxes, destroys those of terminal rows, reports untracked ones',
  crontab: '7 * * * *',
  run: reap,
};
