// Admin: one conversation of any account — status, sandbox, turns with token usage. Never its
// prompts, title, log or secrets (the API does not return them). The read is audited.
import '../config/config.css';
import { api } from '../../api/client';
import { useApi } from '../../api/use-api';
import { Link, useParams } from '../../app/router';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { StatusBadge } from '../../ui/StatusBadge';
import { duration } from '../../ui/time';
import { bytes } from './AdminUserPage';

export default function AdminConversationPage() {
  const { id = '' } = useParams();
  const q = useApi((signal) => api.get('/api/admin/conversations/{id}', { path: { id }, signal }), [id]);
  const c = q.data;
  return (
    <section className="page">
      <ErrorNotice error={q.error} />
      {c && (
        <>
          <p>
            <Link href={`/admin/users/${c.tenant_id}`}>← {c.owner_email ?? 'account'}</Link>
          </p>
          <div className="page-header">
            <h1>
              Conversation <span className="mono">{c.id.slice(0, 8)}…</span>
            </h1>
            <StatusBadge status={c.status} />
          </div>
          <p className="muted">
            Metadata only: prompts, titles, logs and secrets are not shown to administrators.
          </p>
          <dl className="meta-grid">
            <dt>Id</dt>
            <dd className="mono">{c.id}</dd>
            <dt>Agent</dt>
            <dd>
              {c.agent_name ?? 'deleted'} {c.runtime ? `(${c.runtime})` : ''}
            </dd>
            <dt>Source</dt>
            <dd>
              {c.source}
              {c.parent_conversation_id ? ` (sub-conversation of ${c.parent_conversation_id})` : ''}
            </dd>
            <dt>Sandbox</dt>
            <dd>{c.sandbox ? c.sandbox.status : 'none'}</dd>
            <dt>Log size</dt>
            <dd>
              {bytes(c.log_bytes)}
              {c.log_truncated ? ' (budget reached)' : ''}
            </dd>
            <dt>Created</dt>
            <dd>{new Date(c.created_at).toLocaleString()}</dd>
          </dl>
          <h2 className="h3 section-gap">Turns</h2>
          <div className="table-wrap section-gap">
            <table className="data-table">
              <thead>
                <tr>
                  <th scope="col">#</th>
                  <th scope="col">Status</th>
                  <th scope="col">Duration</th>
                  <th scope="col">Tokens in / out</th>
                  <th scope="col" className="hide-narrow">
                    Cost
                  </th>
                </tr>
              </thead>
              <tbody>
                {c.turns.map((t) => (
                  <tr key={t.seq}>
                    <td>{t.seq}</td>
                    <td>
                      {t.status}
                      {t.exit_code !== null ? ` (exit ${t.exit_code})` : ''}
                    </td>
                    <td>
                      {t.started_at && t.ended_at
                        ? duration(Date.parse(t.ended_at) - Date.parse(t.started_at))
                        : '—'}
                    </td>
                    <td>
                      {t.usage?.input_tokens ?? '—'} / {t.usage?.output_tokens ?? '—'}
                    </td>
                    <td className="hide-narrow">
                      {t.usage?.cost_usd !== undefined ? `$${t.usage.cost_usd.toFixed(4)}` : '—'}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
    </section>
  );
}
