// Following a conversation's SSE stream (`GET /api/conversations/:id/stream`) across
// disconnects.
//
// What must hold (tests in follow.test.ts):
// - no event is lost or shown twice across a reconnect: every reconnect sends
//   `Last-Event-ID: <id of the last event handled>`, and the server resumes after it;
// - a dropped connection, a 5xx, a 429 or a silent socket (no byte, not even a heartbeat,
//   for `deadAfterMs`) is retried with backoff (doubling up to `retryMaxMs`, or the server's
//   Retry-After); the follower gives up only after `giveUpMs` without a working connection,
//   naming how to re-attach. A 4xx other than 408/429 (401, 404) is final: retrying cannot help;
// - `owner_lost` is told to the user (once until the log moves again: the server repeats it at
//   every heartbeat) and following goes on: the stream resumes once another process takes the
//   conversation over;
// - the user's abort (Ctrl-C) ends following at once and touches nothing on the server.

import type { ApiClient } from './client.ts';
import { ApiError, CliError } from './errors.ts';
import type { LogEvent } from './render.ts';
import { createSseParser, type SseEvent } from './sse.ts';

export type Decision = 'continue' | 'stop';

export interface FollowOptions {
  client: ApiClient;
  conversationId: string;
  /** The `streams` filter; null for the server's default (stdout, stderr, stage). */
  streams: string[] | null;
  /** false: drain what exists and end (`wait=false`); true: follow live. */
  wait: boolean;
  /** Start after this event id (sent as the first Last-Event-ID); from the beginning when absent. */
  after?: string;
  signal: AbortSignal;
  onEvent(event: LogEvent): Decision | Promise<Decision>;
  onNotice(kind: 'owner_lost' | 'reconnecting' | 'reconnected', text: string): void;
  /**
   * Asked when a live stream was closed by the server or stayed quiet (no event) for
   * `quietMs`: 'stop' ends following (the conversation or the turn ended meanwhile).
   */
  check?(): Promise<Decision>;
  timing?: Partial<FollowTiming>;
}

export interface FollowTiming {
  retryInitialMs: number;
  retryMaxMs: number;
  giveUpMs: number;
  /** The server sends a heartbeat every 15 s: a socket silent this long is dead. */
  deadAfterMs: number;
  quietMs: number;
}

const DEFAULT_TIMING: FollowTiming = {
  retryInitialMs: 250,
  retryMaxMs: 5000,
  giveUpMs: 120_000,
  deadAfterMs: 45_000,
  quietMs: 30_000,
};

export type FollowEnd = 'end' | 'stopped' | 'detached';

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

/** 4xx refusals that no retry can change. */
function isFinal(err: unknown): boolean {
  if (err instanceof ApiError)
    return err.status >= 400 && err.status < 500 && ![408, 429].includes(err.status);
  return !(err instanceof CliError);
}

export async function follow(options: FollowOptions): Promise<{ end: FollowEnd; lastEventId: string }> {
  const timing = { ...DEFAULT_TIMING, ...options.timing };
  const { client, conversationId, signal } = options;
  const query = new URLSearchParams();
  if (options.streams) query.set('streams', options.streams.join(','));
  if (!options.wait) query.set('wait', 'false');
  const path = `/api/conversations/${encodeURIComponent(conversationId)}/stream${
    query.size > 0 ? `?${query}` : ''
  }`;

  let lastEventId = options.after ?? '';
  let delay = timing.retryInitialMs;
  let failingSince: number | null = null;
  let toldReconnecting = false;
  let toldOwnerLost = false;

  const retry = async (waitMs: number): Promise<void> => {
    failingSince ??= Date.now();
    if (Date.now() - failingSince > timing.giveUpMs) {
      throw new CliError(
        `lost the stream of conversation ${conversationId}; re-attach with: paddock logs ${conversationId} -f`,
      );
    }
    if (!toldReconnecting) {
      options.onNotice('reconnecting', 'connection to the stream lost, reconnecting…');
      toldReconnecting = true;
    }
    await sleep(waitMs, signal);
    delay = Math.min(delay * 2, timing.retryMaxMs);
  };

  while (!signal.aborted) {
    const connection = new AbortController();
    const abort = () => connection.abort();
    signal.addEventListener('abort', abort, { once: true });
    try {
      let response: Response;
      try {
        response = await client.open(path, {
          headers: lastEventId ? { 'last-event-id': lastEventId } : {},
          signal: connection.signal,
        });
      } catch (err) {
        if (signal.aborted) break;
        if (isFinal(err)) throw err;
        const retryAfter = err instanceof ApiError ? err.retryAfterSeconds : null;
        await retry(retryAfter !== null ? retryAfter * 1000 : delay);
        continue;
      }

      // Connected: read until the server ends, closes, goes silent or we decide to stop.
      let outcome: FollowEnd | 'closed' | 'dropped' = 'closed';
      let lastEventAt = Date.now();
      let checking = false;
      let checkSaysStop = false;
      const queue: SseEvent[] = [];
      const parser = createSseParser({ event: (e) => queue.push(e) });
      let deadTimer = setTimeout(abort, timing.deadAfterMs);
      const quietTimer = setInterval(
        () => {
          if (!options.check || checking || Date.now() - lastEventAt < timing.quietMs) return;
          checking = true;
          options.check().then(
            (decision) => {
              checking = false;
              lastEventAt = Date.now();
              if (decision === 'stop') {
                checkSaysStop = true;
                connection.abort();
              }
            },
            () => {
              checking = false;
            },
          );
        },
        Math.min(1000, timing.quietMs),
      );
      const reader = (response.body as ReadableStream<Uint8Array>).getReader();
      try {
        read: while (true) {
          const { done, value } = await reader.read();
          if (done) break;
          clearTimeout(deadTimer);
          deadTimer = setTimeout(abort, timing.deadAfterMs);
          if (failingSince !== null || toldReconnecting) {
            if (toldReconnecting) options.onNotice('reconnected', 'reconnected, resuming the stream');
            toldReconnecting = false;
            failingSince = null;
            delay = timing.retryInitialMs;
          }
          parser.push(value);
          while (queue.length > 0) {
            const sse = queue.shift() as SseEvent;
            if (sse.event === 'end') {
              outcome = 'end';
              break read;
            }
            if (sse.event === 'owner_lost') {
              // The server repeats it at every heartbeat while nobody owns the conversation: tell once.
              if (!toldOwnerLost)
                options.onNotice(
                  'owner_lost',
                  'the server running this conversation stopped; waiting for another to take it over…',
                );
              toldOwnerLost = true;
              continue;
            }
            if (!['stdout', 'stderr', 'stage', 'events'].includes(sse.event)) continue;
            let event: LogEvent;
            try {
              event = JSON.parse(sse.data) as LogEvent;
            } catch {
              continue;
            }
            if (sse.id) lastEventId = sse.id;
            lastEventAt = Date.now();
            toldOwnerLost = false;
            if ((await options.onEvent(event)) === 'stop') {
              outcome = 'stopped';
              break read;
            }
          }
        }
      } catch {
        outcome = 'dropped';
      } finally {
        clearTimeout(deadTimer);
        clearInterval(quietTimer);
        connection.abort();
        reader.releaseLock();
      }
      if (signal.aborted) break;
      if (checkSaysStop) return { end: 'stopped', lastEventId };
      if (outcome === 'end' || outcome === 'stopped') return { end: outcome, lastEventId };
      // The server closed a live stream (or it dropped): ended for good, or resume after lastEventId.
      if (outcome === 'closed' && options.wait && options.check && (await options.check()) === 'stop') {
        return { end: 'stopped', lastEventId };
      }
      await retry(delay);
    } finally {
      signal.removeEventListener('abort', abort);
    }
  }
  return { end: 'detached', lastEventId };
}
