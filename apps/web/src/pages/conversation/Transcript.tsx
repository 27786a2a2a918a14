// The agent's side of the conversation from the parsed events stream: assistant text as
// Markdown, tool calls and their results collapsible, errors, usage and the session id.
// Prompts come from the turns. Anything unknown is shown as JSON rather than dropped.

import type { LogModel, TranscriptItem } from './log-model';
import { Markdown } from './markdown';
import { useModelVersion } from './use-model';

interface TurnLite {
  id: string;
  seq: number;
  prompt: string;
}

const str = (v: unknown) => (typeof v === 'string' ? v : v === undefined ? '' : JSON.stringify(v, null, 2));

function Item({ item }: { item: TranscriptItem }) {
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
            <span aria-hidden="true">⚙</span> {str(e['name'] ?? e['tool'] ?? 'tool call')}
          </summary>
          <pre>{str(e['input'] ?? e['arguments'] ?? e['args'])}</pre>
        </details>
      );
    case 'tool_result': {
      const isError = e['is_error'] === true || e['error'] === true;
      return (
        <details className={isError ? 'tx-tool tx-tool-error' : 'tx-tool'}>
          <summary>
            <span aria-hidden="true">↳</span> {isError ? 'tool error' : 'tool result'}
            {e['name'] ? ` · ${str(e['name'])}` : ''}
          </summary>
          <pre>{str(e['output'] ?? e['content'] ?? e['result'] ?? e['text'])}</pre>
        </details>
      );
    }
    case 'error':
      return (
        <div className="notice notice-error" role="note">
          {str(e['message'] ?? e['text'] ?? e['error'])}
        </div>
      );
    case 'usage':
      return (
        <p className="tx-meta">
          usage:{' '}
          {Object.entries(e)
            .filter(([k, v]) => k !== 'kind' && typeof v === 'number')
            .map(([k, v]) => `${k.replaceAll('_', ' ')} ${(v as number).toLocaleString()}`)
            .join(' · ')}
        </p>
      );
    case 'session':
      return <p className="tx-meta">session {str(e['session_id'] ?? e['id'])}</p>;
    case 'raw':
      return null;
    default:
      return <pre className="tx-unknown">{JSON.stringify(e, null, 2)}</pre>;
  }
}

export function Transcript({ model, turns }: { model: LogModel; turns: readonly TurnLite[] }) {
  useModelVersion(model);
  const byTurn = new Map<string | null, TranscriptItem[]>();
  for (const item of model.transcript) {
    const list = byTurn.get(item.turnId) ?? [];
    list.push(item);
    byTurn.set(item.turnId, list);
  }
  return (
    <div className="transcript">
      {turns.map((t) => (
        <section key={t.id} className="tx-turn" aria-label={`Turn ${t.seq}`}>
          <div className="tx-prompt">
            <span className="tx-who">You · turn {t.seq}</span>
            <p>{t.prompt}</p>
          </div>
          {(byTurn.get(t.id) ?? []).map((item) => (
            <Item key={item.id} item={item} />
          ))}
        </section>
      ))}
    </div>
  );
}
