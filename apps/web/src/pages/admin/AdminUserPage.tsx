// Admin: one account's metadata, resource counts and conversations (status, agent, turns,
// sizes — never prompts, titles, logs or secrets). Each read is audited by the server. Its
// password help: a reset link by mail, or a temporary password shown here once (both audited).
import '../config/config.css';
import { useState } from 'react';
import { api } from '../../api/client';
import { useSession } from '../../api/session';
import { useApi } from '../../api/use-api';
import { Link, useParams } from '../../app/router';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { counted } from '../../ui/plural';
import { StatusBadge } from '../../ui/StatusBadge';
import { relativeTime } from '../../ui/time';
import { AdminUsageBlock } from '../account/UsageBlock';

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** Gets a locked-out person back in: the reset link "Forgot password" sends, or a temporary password. */
function PasswordHelp({ id, email }: { id: string; email: string }) {
  const [error, setError] = useState<unknown>(null);
  const [sent, setSent] = useState(false);
  const [temporary, setTemporary] = useState<string | null>(null);
  const sendLink = async () => {
    setError(null);
    setSent(false);
    try {
      await api.post('/api/admin/users/{id}/password-reset', { path: { id } });
      setSent(true);
    } catch (err) {
      setError(err);
    }
  };
  const setPassword = async () => {
    const question = `Set a temporary password for ${email}? Their current password stops working and every session of theirs ends.`;
    if (!window.confirm(question)) return;
    setError(null);
    setSent(false);
    try {
      const res = await api.post('/api/admin/users/{id}/temporary-password', { path: { id } });
      setTemporary(res.temporary_password);
    } catch (err) {
      setError(err);
    }
  };
  return (
    <>
      <h2 className="h3 section-gap">Password</h2>
      <ErrorNotice error={error} />
      {sent && (
        <p role="status" className="notice notice-ok">
          A password reset link is on its way to {email}. It works once, for an hour.
        </p>
      )}
      {temporary && (
        <div className="notice notice-ok" role="status">
          <p>
            Temporary password set. Give it to {email} yourself; it is not shown again. They sign in with it
            and choose their own on the Account page.
          </p>
          <p>
            <span className="visually-hidden">Temporary password: </span>
            <code className="plaintext-key">{temporary}</code>
          </p>
        </div>
      )}
      <div className="form-actions">
        <button type="button" className="btn btn-small" onClick={sendLink}>
          Send a reset link
        </button>
        <button type="button" className="btn btn-small" onClick={setPassword}>
          Set a temporary password
        </button>
      </div>
    </>
  );
}

export default function AdminUserPage() {
  const { me } = useSession();
  const { id = '' } = useParams();
  const detail = useApi((signal) => api.get('/api/admin/users/{id}', { path: { id }, signal }), [id]);
  const conversations = useApi(
    (signal) =>
      api.get('/api/admin/users/{id}/conversations', { path: { id }, query: { limit: 100 }, signal }),
    [id],
  );
  const d = detail.data;
  return (
    <section className="page">
      <p>
        <Link href="/admin/users">← Users</Link>
      </p>
      <ErrorNotice error={detail.error ?? conversations.error} />
      {d && (
        <>
          <div className="page-header">
            <h1>{d.user.email}</h1>
          </div>
          <p className="muted">Metadata only: an administrator never sees prompts, logs or secrets here.</p>
          <dl className="meta-grid">
            <dt>Status</dt>
            <dd>
              {d.user.suspended ? 'suspended' : 'active'} ·{' '}
              {d.user.email_verified ? 'verified' : 'unverified'}
              {d.user.is_admin ? ' · admin' : ''}
            </dd>
            <dt>Created</dt>
            <dd>{new Date(d.user.created_at).toLocaleString()}</dd>
            <dt>Last activity</dt>
            <dd>{d.last_activity_at ? relativeTime(d.last_activity_at) : 'none'}</dd>
            <dt>Resources</dt>
            <dd>
              {counted(d.counts.environments, 'environment')} · {counted(d.counts.vaults, 'vault')} ·{' '}
              {counted(d.counts.agents, 'agent')} · {counted(d.counts.conversations, 'conversation')} ·{' '}
              {counted(d.counts.active_api_keys, 'active API key')}
            </dd>
          </dl>
          <AdminUsageBlock id={d.user.id} />
          {d.user.id !== me?.id && <PasswordHelp id={d.user.id} email={d.user.email} />}
        </>
      )}
      <h2 className="h3 section-gap">Conversations</h2>
      {conversations.data?.data.length === 0 && <p className="muted">No conversations.</p>}
      {conversations.data && conversations.data.data.length > 0 && (
        <div className="table-wrap section-gap">
          <table className="data-table">
            <thead>
              <tr>
                <th scope="col">Conversation</th>
                <th scope="col">Status</th>
                <th scope="col" className="hide-narrow">
                  Agent
                </th>
                <th scope="col" className="hide-narrow">
                  Turns
                </th>
                <th scope="col" className="hide-narrow">
                  Log
                </th>
                <th scope="col">Last activity</th>
              </tr>
            </thead>
            <tbody>
              {conversations.data.data.map((c) => (
                <tr key={c.id}>
                  <td>
                    <Link href={`/admin/conversations/${c.id}`} className="mono">
                      {c.id.slice(0, 8)}…<span className="visually-hidden"> conversation {c.id}</span>
                    </Link>
                  </td>
                  <td>
                    <StatusBadge status={c.status} />
                  </td>
                  <td className="hide-narrow">
                    {c.agent_name ?? 'deleted'} {c.runtime && <span className="muted">({c.runtime})</span>}
                  </td>
                  <td className="hide-narrow">{c.turn_count}</td>
                  <td className="hide-narrow">
                    {bytes(c.log_bytes)}
                    {c.log_truncated ? ' (truncated)' : ''}
                  </td>
                  <td>{relativeTime(c.last_activity_at)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
