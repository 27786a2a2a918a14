// The account's audit log, newest first, a page at a time.
import { useState } from 'react';
import { type ApiData, api } from '../../api/client';
import { useApi } from '../../api/use-api';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { relativeTime } from '../../ui/time';
import { AccountNav } from './AccountNav';

type AuditEvent = ApiData<'/api/audit'>['data'][number];

/** Metadata as short `key=value` pairs (ids, names, counts — the server never records secrets). */
function metadataText(m: Record<string, unknown>): string {
  return Object.entries(m)
    .map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
    .join(' ');
}

export default function AuditPage() {
  const first = useApi((signal) => api.get('/api/audit', { query: { limit: 50 }, signal }), []);
  const [more, setMore] = useState<AuditEvent[]>([]);
  const [cursor, setCursor] = useState<string | null | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const next = cursor === undefined ? (first.data?.meta.next_cursor ?? null) : cursor;
  const rows = [...(first.data?.data ?? []), ...more];
  const loadMore = async () => {
    if (!next) return;
    try {
      const page = await api.get('/api/audit', { query: { limit: 50, cursor: next } });
      setMore((m) => [...m, ...page.data]);
      setCursor(page.meta.next_cursor);
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section className="page">
      <AccountNav />
      <div className="page-header">
        <h1>Audit log</h1>
      </div>
      <ErrorNotice error={first.error ?? error} />
      <div className="table-wrap">
        <table className="data-table">
          <thead>
            <tr>
              <th scope="col">When</th>
              <th scope="col">Event</th>
              <th scope="col">By</th>
              <th scope="col" className="hide-narrow">
                Details
              </th>
            </tr>
          </thead>
          <tbody>
            {rows.map((e) => (
              <tr key={e.id}>
                <td>
                  <time dateTime={e.created_at} title={new Date(e.created_at).toLocaleString()}>
                    {relativeTime(e.created_at)}
                  </time>
                </td>
                <td>
                  <code>{e.type}</code>
                </td>
                <td>
                  {e.actor.kind === 'api_key' ? 'API key' : e.actor.kind}
                  {e.ip ? <span className="muted"> · {e.ip}</span> : null}
                </td>
                <td className="hide-narrow mono">{metadataText(e.metadata)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {rows.length === 0 && !first.loading && <p className="muted">No events yet.</p>}
      {next && (
        <p>
          <button type="button" className="btn" onClick={loadMore}>
            Show older events
          </button>
        </p>
      )}
    </section>
  );
}
