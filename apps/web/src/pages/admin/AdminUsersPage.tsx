// Admin: every account, searchable by email; verify, suspend/unsuspend, promote. Every list
// read is audited by the server in the admin's own log.
import '../config/config.css';
import { type FormEvent, useState } from 'react';
import { type ApiData, api } from '../../api/client';
import { useSession } from '../../api/session';
import { useSite } from '../../api/site';
import { useApi } from '../../api/use-api';
import { Link, navigate, useLocation } from '../../app/router';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { relativeTime } from '../../ui/time';

type User = ApiData<'/api/admin/users'>['data'][number];

export default function AdminUsersPage() {
  const { me } = useSession();
  const site = useSite();
  const { search } = useLocation();
  const q = search.get('q') ?? '';
  const [typed, setTyped] = useState(q);
  const [more, setMore] = useState<User[]>([]);
  const [cursor, setCursor] = useState<string | null | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const [changed, setChanged] = useState<Record<string, User>>({});
  const first = useApi(
    (signal) => api.get('/api/admin/users', { query: { limit: 50, ...(q ? { search: q } : {}) }, signal }),
    [q],
  );
  const next = cursor === undefined ? (first.data?.meta.next_cursor ?? null) : cursor;
  const rows = [...(first.data?.data ?? []), ...more].map((u) => changed[u.id] ?? u);

  const submit = (e: FormEvent) => {
    e.preventDefault();
    setMore([]);
    setCursor(undefined);
    navigate(`/admin/users${typed.trim() ? `?q=${encodeURIComponent(typed.trim())}` : ''}`, {
      replace: true,
    });
  };
  const loadMore = async () => {
    if (!next) return;
    try {
      const page = await api.get('/api/admin/users', {
        query: { limit: 50, cursor: next, ...(q ? { search: q } : {}) },
      });
      setMore((m) => [...m, ...page.data]);
      setCursor(page.meta.next_cursor);
    } catch (err) {
      setError(err);
    }
  };
  const act = async (user: User, action: 'suspend' | 'unsuspend' | 'verify' | 'promote') => {
    const questions = {
      suspend: `Suspend ${user.email}? Their sessions end and they can no longer sign in or use their keys.`,
      promote: `Make ${user.email} an administrator? Only an operator can undo this.`,
    } as Record<string, string>;
    if (questions[action] && !window.confirm(questions[action])) return;
    setError(null);
    try {
      const path = { id: user.id };
      const res =
        action === 'suspend'
          ? await api.post('/api/admin/users/{id}/suspend', { path })
          : action === 'unsuspend'
            ? await api.post('/api/admin/users/{id}/unsuspend', { path })
            : action === 'verify'
              ? await api.post('/api/admin/users/{id}/verify', { path })
              : await api.post('/api/admin/users/{id}/promote', { path });
      setChanged((c) => ({ ...c, [user.id]: res.user }));
    } catch (err) {
      setError(err);
    }
  };

  return (
    <section className="page">
      <div className="page-header">
        <h1>Users</h1>
        <span className="form-actions">
          {site.data?.billing.enabled && <Link href="/admin/billing">Billing</Link>}
          <Link href="/admin/sandboxes">Untracked sandboxes</Link>
        </span>
      </div>
      <search>
        <form className="form-actions section-gap-bottom" onSubmit={submit}>
          <div className="field">
            <label htmlFor="user-search">Search by email</label>
            <input id="user-search" type="search" value={typed} onChange={(e) => setTyped(e.target.value)} />
          </div>
          <button type="submit" className="btn">
            Search
          </button>
        </form>
      </search>
      <ErrorNotice error={first.error ?? error} />
      <div className="table-wrap">
        <table className="data-table data-table-stack" aria-busy={first.loading}>
          <thead>
            <tr>
              <th scope="col">Email</th>
              <th scope="col">Status</th>
              <th scope="col" className="hide-narrow">
                Created
              </th>
              <th scope="col">Actions</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((u) => (
              <tr key={u.id}>
                <td>
                  <Link href={`/admin/users/${u.id}`}>{u.email}</Link>
                </td>
                <td>
                  <span className="tags">
                    {u.suspended && <span className="tag tag-danger">suspended</span>}
                    {!u.email_verified && <span className="tag">unverified</span>}
                    {u.is_admin && <span className="tag tag-ok">admin</span>}
                    {!u.suspended && u.email_verified && !u.is_admin && <span className="muted">active</span>}
                  </span>
                </td>
                <td className="hide-narrow">{relativeTime(u.created_at)}</td>
                <td>
                  <span className="row-actions row-actions-start">
                    {!u.email_verified && (
                      <button type="button" className="btn btn-small" onClick={() => act(u, 'verify')}>
                        Verify<span className="visually-hidden"> {u.email}</span>
                      </button>
                    )}
                    {u.id !== me?.id &&
                      (u.suspended ? (
                        <button type="button" className="btn btn-small" onClick={() => act(u, 'unsuspend')}>
                          Unsuspend<span className="visually-hidden"> {u.email}</span>
                        </button>
                      ) : (
                        <button
                          type="button"
                          className="btn btn-small btn-danger"
                          onClick={() => act(u, 'suspend')}
                        >
                          Suspend<span className="visually-hidden"> {u.email}</span>
                        </button>
                      ))}
                    {!u.is_admin && (
                      <button type="button" className="btn btn-small" onClick={() => act(u, 'promote')}>
                        Make admin<span className="visually-hidden"> {u.email}</span>
                      </button>
                    )}
                  </span>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {rows.length === 0 && !first.loading && <p className="muted">No account matches.</p>}
      {next && (
        <p>
          <button type="button" className="btn" onClick={loadMore}>
            Show more
          </button>
        </p>
      )}
    </section>
  );
}
