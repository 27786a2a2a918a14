// The agent's side of the conversation from the parsed events stream: assistant text as
// Markdown, tool calls and their results collapsible, errors, usage and the session id.
// Prompts come from the turns. Kinds and fields: docs/api.md "Turn events"; raw lines stay in
// the raw output; anything unknown is shown as JSON rather than dropped. A tool call of a running
// turn with no result yet says it is still running, and for how long: a CLI prints nothing while
// its tool runs, and a silent page reads as a hung one.
import { useEffect, useState } from 'react';
import { duration } from '../../ui/time';

import type { LogModel, TranscriptItem } from './log-model';
import { Markdown } from './markdown';
import { useModelVersion } from './use-model';

interface TurnLite {
  id: string;
  seq: number;
  prompt: string;
  status: string;
}

function useNow(active: boolean): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (!active) return;
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [active]);
  return now;
}

/** The tool call of a turn that has no result after it yet (the one its CLI waits on). */
function waitingCall(items: readonly TranscriptItem[]): TranscriptItem | undefined {
  const last = items.findLast((i) => i.kind === 'tool_call' || i.kind === 'tool_result');
  return last?.kind === 'tool_call' ? last : undefined;
}

const str = (v: unknown) => (typeof v === 'string' ? v : v === undefined ? '' : JSON.stringify(v, null, 2));

function Item({ item, runningFor }: { item: TranscriptItem; runningFor?: number }) {
  const e = item.event;
  switch (item.kind) {
    case 'text':
      return (
        <div className="tx-text">
          <Markdown text={item.text ?? str(e['text'])} />
        </div>
      );
    case 'tool_call':
      return (
        <details className="tx-tool">
          <summary>
            <span aria-hidden="true">⚙</span> {str(e['name'] ?? 'tool call')}
            {typeof (e['input'] as { command?: unknown })?.command === 'string' && (
              <code className="tx-cmd">{(e['input'] as { command: string }).command}</code>
            )}
            {runningFor !== undefined && (
              <span className="tx-running" role="status">
                still running ({duration(runningFor)}): its output comes when it ends
              </span>
            )}
          </summary>
          <pre>{str(e['input'])}</pre>
        </details>
      );
    case 'tool_result': {
      const isError = e['is_error'] === true;
      return (
        <details className={isError ? 'tx-tool tx-tool-error' : 'tx-tool'}>
          <summary>
            <span aria-hidden="true">↳</span> {isError ? 'tool error' : 'tool result'}
            {e['name'] ? ` · ${str(e['name'])}` : ''}
          </summary>
          <pre>{str(e['output'])}</pre>
        </details>
      );
    }
    case 'error':
      return (
        <div className="notice notice-error" role="note">
          {str(e['message'])}
        </div>
      );
    case 'usage': {
      const usage = (e['usage'] && typeof e['usage'] === 'object' ? e['usage'] : {}) as Record<
        string,
        unknown
      >;
      return (
        <p className="tx-meta">
          usage:{' '}
          {Object.entries(usage)
            .filter(([, v]) => typeof v === 'number')
            .map(([k, v]) =>
              k === 'cost_usd'
                ? `$${(v as number).toFixed(4)}`
                : `${k.replaceAll('_', ' ')} ${(v as number).toLocaleString()}`,
            )
            .join(' · ')}
        </p>
      );
    }
    case 'session':
      return <p className="tx-meta">session {str(e['session_id'])}</p>;
    case 'raw':
      return null;
    default:
      return <pre className="tx-unknown">{JSON.stringify(e, null, 2)}</pre>;
  }
}

export function Transcript({ model, turns }: { model: LogModel; turns: readonly TurnLite[] }) {
  useModelVersion(model);
  const running = turns.find((t) => t.status === 'running');
  const now = useNow(running !== undefined);
  const byTurn = new Map<string | null, TranscriptItem[]>();
  for (const item of model.transcript) {
    const list = byTurn.get(item.turnId) ?? [];
    list.push(item);
    byTurn.set(item.turnId, list);
  }
  return (
    <div className="transcript">
      {turns.map((t) => {
        const items = byTurn.get(t.id) ?? [];
        const waiting = t.status === 'running' ? waitingCall(items) : undefined;
        return (
          <section key={t.id} className="tx-turn" aria-label={`Turn ${t.seq}`}>
            <div className="tx-prompt">
              <span className="tx-who">You · turn {t.seq}</span>
              <p>{t.prompt}</p>
            </div>
            {items.map((item) => (
              <Item
                key={item.id}
                item={item}
                {...(item === waiting ? { runningFor: Math.max(0, now - Date.parse(item.at)) } : {})}
              />
            ))}
          </section>
        );
      })}
    </div>
  );
}
