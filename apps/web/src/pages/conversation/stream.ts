// Follows a conversation's log over SSE (GET /api/conversations/:id/stream), the same feed
// every client reads. EventSource reconnects by itself and sends Last-Event-ID, so the
// server resumes strictly after the last event we have; the model drops anything it has
// seen, so nothing repeats. What the person is told:
//   live          events flow (or the conversation is quiet: heartbeats)
//   reconnecting  the connection dropped; the browser is reconnecting
//   owner_lost    the server process running the conversation is gone; the stream stays
//                 open and resumes when another server takes it over
//   gone          the stream was refused (network or server down); retried with backoff
//   deleted       the conversation was deleted while we watched
import { useEffect, useState } from 'react';
import type { FeedEvent, LogModel } from './log-model';

export type StreamState = 'connecting' | 'live' | 'reconnecting' | 'owner_lost' | 'gone' | 'deleted';

const STREAMS = ['stdout', 'stderr', 'stage', 'events'] as const;

export function useConversationStream(
  id: string,
  model: LogModel,
  onStage: (event: FeedEvent) => void,
): StreamState {
  const [state, setState] = useState<StreamState>('connecting');
  useEffect(() => {
    let source: EventSource | null = null;
    let retry: ReturnType<typeof setTimeout> | undefined;
    let attempts = 0;
    let stopped = false;
    // Events are applied in slices of a few milliseconds, so a replay of a long log (one
    // network read can hold thousands of lines) never blocks the page in one long task.
    const queue: string[] = [];
    let draining: ReturnType<typeof setTimeout> | undefined;
    const drain = () => {
      draining = undefined;
      const until = performance.now() + 8;
      while (queue.length > 0 && performance.now() < until) {
        try {
          const event = JSON.parse(queue.shift()!) as FeedEvent;
          if (model.add([event]) > 0 && event.stream === 'stage') onStage(event);
        } catch {
          // not an event of ours
        }
      }
      if (queue.length > 0) draining = setTimeout(drain, 0);
    };

    const open = () => {
      // A fresh EventSource has no Last-Event-ID: resume from what the model holds.
      const after = model.lastId ? `?after=${encodeURIComponent(model.lastId)}` : '';
      const es = new EventSource(`/api/conversations/${encodeURIComponent(id)}/stream${after}`);
      source = es;
      es.onopen = () => {
        attempts = 0;
        setState('live');
      };
      const onEvent = (message: MessageEvent<string>) => {
        setState((s) => (s === 'owner_lost' ? 'live' : s));
        queue.push(message.data);
        draining ??= setTimeout(drain, 0);
      };
      for (const name of STREAMS) es.addEventListener(name, onEvent as EventListener);
      es.addEventListener('owner_lost', () => setState('owner_lost'));
      es.addEventListener('end', (message) => {
        let reason = '';
        try {
          reason = String(
            (JSON.parse((message as MessageEvent<string>).data) as { reason?: string }).reason ?? '',
          );
        } catch {
          // no body: an ordinary end
        }
        if (reason === 'deleted') {
          setState('deleted');
          es.close();
        }
      });
      es.onerror = () => {
        if (stopped) return;
        if (es.readyState === EventSource.CONNECTING) {
          setState('reconnecting');
          return;
        }
        // Closed for good (a refused request): open a new one, later and later.
        es.close();
        setState('gone');
        attempts++;
        retry = setTimeout(open, Math.min(30_000, 1000 * 2 ** Math.min(attempts, 5)));
      };
    };
    open();
    return () => {
      stopped = true;
      clearTimeout(retry);
      clearTimeout(draining);
      source?.close();
    };
  }, [id, model, onStage]);
  return state;
}
