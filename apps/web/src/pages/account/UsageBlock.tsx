// This month's usage (UTC) on the account page, and the same figures for any account on the
// admin's user page: sandbox hours busy (a turn running) and parked (ready and idle), turns,
// tokens and cost as the runtimes reported them, then per runtime and model.
import { type ApiData, api } from '../../api/client';
import { useApi } from '../../api/use-api';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { Section } from '../config/editors';

export type Usage = ApiData<'/api/account/usage'>;

const hours = (seconds: number) => `${(seconds / 3600).toFixed(2)} h`;
const count = (n: number) => n.toLocaleString('en-US');
const cost = (usd: number | null) => (usd === null ? 'not reported' : `$${usd.toFixed(4)}`);

/** The month a range covers, e.g. "December 2026" (the range starts on its first day, UTC). */
export function monthOf(usage: Usage): string {
  return new Date(usage.from).toLocaleDateString('en-US', {
    month: 'long',
    year: 'numeric',
    timeZone: 'UTC',
  });
}

export function UsageFigures({ usage, label }: { usage: Usage; label: string }) {
  const s = usage.sandboxes;
  const t = usage.turns;
  return (
    <>
      <dl className="meta-grid">
        <dt>Sandbox hours busy</dt>
        <dd>{hours(s.busy_seconds)}</dd>
        <dt>Sandbox hours parked</dt>
        <dd>{hours(s.parked_seconds)}</dd>
        <dt>Sandboxes</dt>
        <dd>
          {count(s.count)}
          {s.failed_before_ready > 0 ? ` (${count(s.failed_before_ready)} failed before ready)` : ''}
        </dd>
        <dt>Turns</dt>
        <dd>{count(t.count)}</dd>
        <dt>Tokens</dt>
        <dd>
          {count(t.input_tokens)} in · {count(t.output_tokens)} out · {count(t.cache_read_tokens)} cache read
        </dd>
        <dt>Cost</dt>
        <dd>{cost(t.cost_usd)}</dd>
      </dl>
      {usage.by_model.length > 0 && (
        <div className="table-wrap">
          <table className="data-table">
            <caption className="visually-hidden">{label} per runtime and model</caption>
            <thead>
              <tr>
                <th scope="col">Runtime</th>
                <th scope="col">Model</th>
                <th scope="col">Turns</th>
                <th scope="col" className="hide-narrow">
                  Tokens in
                </th>
                <th scope="col" className="hide-narrow">
                  Tokens out
                </th>
                <th scope="col">Cost</th>
              </tr>
            </thead>
            <tbody>
              {usage.by_model.map((m) => (
                <tr key={`${m.runtime}/${m.model}`}>
                  <td>{m.runtime ?? '–'}</td>
                  <td className="mono">{m.model ?? '–'}</td>
                  <td>{count(m.turns)}</td>
                  <td className="hide-narrow">{count(m.input_tokens)}</td>
                  <td className="hide-narrow">{count(m.output_tokens)}</td>
                  <td>{cost(m.cost_usd)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </>
  );
}

export default function UsageBlock() {
  const usage = useApi((signal) => api.get('/api/account/usage', { signal }), []);
  return (
    <Section
      title="Usage this month"
      hint="Sandboxes and turns that ended this month (UTC). Busy: a turn was running; parked: the sandbox was ready and idle."
    >
      <ErrorNotice error={usage.error} />
      {usage.data ? (
        <UsageFigures usage={usage.data} label={`Usage in ${monthOf(usage.data)}`} />
      ) : (
        <p className="muted">{usage.loading ? 'Loading…' : ''}</p>
      )}
    </Section>
  );
}

/** The admin's user page: the account's usage this month (the read is audited by the server). */
export function AdminUsageBlock({ id }: { id: string }) {
  const usage = useApi((signal) => api.get('/api/admin/users/{id}/usage', { path: { id }, signal }), [id]);
  return (
    <>
      <h2 className="h3 section-gap">Usage this month</h2>
      <ErrorNotice error={usage.error} />
      {usage.data && <UsageFigures usage={usage.data} label={`Usage in ${monthOf(usage.data)}`} />}
    </>
  );
}
