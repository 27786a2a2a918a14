// Turns with their status, duration, the token usage the runtime reported and why a failed one
// failed, beside its status. While the conversation provisions, a waiting turn says what it
// waits for instead of a status word of its own.
import type { ApiData } from '../../api/client';
import { StatusBadge } from '../../ui/StatusBadge';
import { duration } from '../../ui/time';
import { Reason, shownAbove } from './Reason';

export type Turn = ApiData<'/api/conversations/{id}/turns'>['data'][number];

const USAGE_LABELS: Record<string, string> = {
  input_tokens: 'in',
  output_tokens: 'out',
  cache_read_tokens: 'cache',
};

export function usageText(usage: Record<string, number> | null): string | null {
  if (!usage) return null;
  const parts = Object.entries(usage)
    .filter(([k]) => k !== 'cost_usd')
    .map(([k, v]) => `${v.toLocaleString()} ${USAGE_LABELS[k] ?? k.replaceAll('_', ' ')}`);
  if (typeof usage['cost_usd'] === 'number') parts.push(`$${usage['cost_usd'].toFixed(4)}`);
  return parts.length ? parts.join(' · ') : null;
}

export function Turns({
  turns,
  provisioning = false,
  failure = null,
}: {
  turns: readonly Turn[];
  /** The conversation is provisioning its sandbox: a queued turn waits for it. */
  provisioning?: boolean;
  /** The conversation's failure reason, shown above the log already. */
  failure?: string | null;
}) {
  if (turns.length === 0) return <p className="muted">No turns yet.</p>;
  const total: Record<string, number> = {};
  for (const t of turns) for (const [k, v] of Object.entries(t.usage ?? {})) total[k] = (total[k] ?? 0) + v;
  const totalText = turns.length > 1 ? usageText(Object.keys(total).length ? total : null) : null;
  return (
    <>
      <ol className="turns">
        {turns.map((t) => {
          const ms = t.started_at && t.ended_at ? Date.parse(t.ended_at) - Date.parse(t.started_at) : null;
          const usage = usageText(t.usage);
          return (
            <li key={t.id} className="turn">
              <div className="turn-head">
                <span className="turn-seq">#{t.seq}</span>
                {provisioning && t.status === 'queued' ? (
                  <span className="muted">waits for the sandbox</span>
                ) : (
                  <StatusBadge status={t.status} />
                )}
                {ms !== null && <span className="muted">{duration(ms)}</span>}
                {t.exit_code !== null && t.exit_code !== 0 && (
                  <span className="muted">exit {t.exit_code}</span>
                )}
              </div>
              <details className="turn-prompt">
                <summary>{t.prompt.split('\n')[0]}</summary>
                <pre>{t.prompt}</pre>
              </details>
              {usage && <p className="turn-usage">{usage}</p>}
              {t.error && !shownAbove(t.error, failure) && (
                <p className="turn-error">
                  <Reason text={t.error} />
                </p>
              )}
            </li>
          );
        })}
      </ol>
      {totalText && <p className="turn-usage">Total: {totalText}</p>}
    </>
  );
}
