// The open log streams of this process (GET /api/conversations/:id/stream): a slot per request,
// taken before the handler's first await and given back on every way a stream ends.
//
// What must hold (tests in conversations.stream-abort.test.ts):
// 1. A slot is released exactly once, whichever comes first: the client's socket closing (at
//    any moment, also while the handler still reads the database), the stream's body closing,
//    the viewer ending the stream itself (wait=false, a deleted conversation), a refusal (404,
//    422) or the server stopping. Releasing a slot stops its viewer: nothing of a stream
//    (timers, feed subscription, shared tail, database reads) outlives its slot. Test: "1,000
//    streams aborted at random points leave no viewer, timer or database activity behind".
// 2. At most MAX_STREAMS_PER_USER slots per user in this process; one more is refused with 429
//    `too_many_streams` and Retry-After before anything is read. The count is per process
//    (not cluster-wide): what a slot costs (a socket, timers, a page of memory, a share of the
//    pool) is this process's, and an in-memory count needs no database write per open and
//    close and leaves nothing behind when a replica dies. Behind N replicas a user holds at
//    most N × MAX_STREAMS_PER_USER. Test: "refuses a user past the cap of open streams with 429
//    too_many_streams and Retry-After".
// 3. The gauge paddock_conversation_stream_viewers is the number of slots held.
import type { Gauge } from 'prom-client';
import { AppError } from '../../http/errors.ts';

/**
 * Open streams per user and process: above the 40 viewers of one conversation the streaming
 * tests and the review hold open, and far above what a person uses (one per console tab, one
 * per `paddock follow`). One stream costs at most one page of rows (≤ 2 MiB) of memory while its
 * client is slow, so one user holds at most 128 MiB of a process this way.
 */
export const MAX_STREAMS_PER_USER = 64;
/** Streams last minutes to hours: a client retries after a few seconds, not at once. */
export const STREAMS_RETRY_AFTER_SECONDS = 5;

export interface StreamSlot {
  /** The client left or the stream ended (released: the viewer, when attached, is stopped). */
  readonly closed: boolean;
  /** The viewer of this slot: stopped when the slot is released (at once when it already is). */
  attach(stop: () => void): void;
  /** Releases the slot (idempotent). */
  close(): void;
}

export interface StreamViewers {
  /** Takes a slot for the user, or throws 429 too_many_streams (invariant 2). */
  open(tenantId: string): StreamSlot;
  /** Slots held now (the gauge's value). */
  size(): number;
  /** Releases every slot (the server stops: clients resume elsewhere with Last-Event-ID). */
  closeAll(): void;
}

export function createStreamViewers(
  gauge: Pick<Gauge, 'set'>,
  maxPerUser = MAX_STREAMS_PER_USER,
): StreamViewers {
  const perUser = new Map<string, number>();
  const slots = new Set<StreamSlot>();
  gauge.set(0);

  return {
    open(tenantId) {
      const held = perUser.get(tenantId) ?? 0;
      if (held >= maxPerUser)
        throw new AppError(
          'too_many_streams',
          `at most ${maxPerUser} log streams may be open at once per user; close one or retry later`,
          {
            headers: { 'retry-after': String(STREAMS_RETRY_AFTER_SECONDS) },
            extra: { limit: maxPerUser },
          },
        );
      perUser.set(tenantId, held + 1);
      let closed = false;
      let stop: (() => void) | null = null;
      const slot: StreamSlot = {
        get closed() {
          return closed;
        },
        attach(viewerStop) {
          stop = viewerStop;
          if (closed) viewerStop();
        },
        close() {
          if (closed) return;
          closed = true;
          slots.delete(slot);
          const left = (perUser.get(tenantId) ?? 1) - 1;
          if (left > 0) perUser.set(tenantId, left);
          else perUser.delete(tenantId);
          gauge.set(slots.size);
          stop?.();
        },
      };
      slots.add(slot);
      gauge.set(slots.size);
      return slot;
    },
    size: () => slots.size,
    closeAll() {
      for (const slot of [...slots]) slot.close();
    },
  };
}
