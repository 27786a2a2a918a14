// The dashboard: the account's conversations, newest activity first, with status, agent,
// title, last activity and the unread dot; filters by status and agent live in the URL
// (?status=&agent=) so a filtered view can be bookmarked. Refreshes every few seconds while
// the tab is visible, so statuses move without a reload.
import { useEffect, useMemo, useRef, useState } from 'react';
import { type ApiData, api } from '../../api/client';
import { useAgents } from '../../api/resources';
import { openNewConversation } from '../../app/new-conversation';
import { Link, navigate, useLocation } from '../../app/router';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { Flash } from '../../ui/Flash';
import { StatusBadge } from '../../ui/StatusBadge';
import { relativeTime } from '../../ui/time';

type Conversation = ApiData<'/api/conversations'>['data'][number];
const STATUSES = ['pending', 'running', 'idle', 'failed', 'terminated'] as const;
type Status = (typeof STATUSES)[number];
const REFRESH_MS = 5000;

export default function DashboardPage() {
  const { search } = useLocation();
  const statusParam = search.get('status');
  const status = STATUSES.includes(statusParam as Status) ? (statusParam as Status) : undefined;
  const agentFilter = search.get('agent') ?? undefined;
  const agents = useAgents();
  const agentNames = useMemo(() => new Map((agents.data ?? []).map((a) => [a.id, a.name])), [agents.data]);

  const [pages, setPages] = useState<Conversation[][]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);
  const [error, setError] = useState<unknown>(null);
  /** Pages loaded with "Show more": while there are any, the cursor is theirs. */
  const extraPages = useRef(0);

  // The first page is re-read on every refresh; pages loaded with "Show more" stay as read.
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const controller = new AbortController();
    const load = async () => {
      try {
        const res = await api.get('/api/conversations', {
          query: { status, agent_id: agentFilter, limit: 50 },
          signal: controller.signal,
        });
        if (stopped) return;
        setPages((p) => [res.data, ...p.slice(1)]);
        if (extraPages.current === 0) setCursor(res.meta.has_more ? res.meta.next_cursor : null);
        setError(null);
      } catch (err) {
        if (!stopped) setError(err);
      } finally {
        if (!stopped) {
          setLoading(false);
          timer = setTimeout(tick, REFRESH_MS);
        }
      }
    };
    const tick = () => {
      if (document.visibilityState === 'visible') void load();
      else timer = setTimeout(tick, REFRESH_MS);
    };
    setPages([]);
    setCursor(null);
    extraPages.current = 0;
    setLoading(true);
    void load();
    return () => {
      stopped = true;
      controller.abort();
      clearTimeout(timer);
    };
  }, [status, agentFilter]);

  const more = async () => {
    if (!cursor) return;
    try {
      const res = await api.get('/api/conversations', {
        query: { status, agent_id: agentFilter, limit: 50, cursor },
      });
      extraPages.current++;
      setPages((p) => [...p, res.data]);
      setCursor(res.meta.has_more ? res.meta.next_cursor : null);
    } catch (err) {
      setError(err);
    }
  };

  const setFilter = (name: string, value: string) => {
    const next = new URLSearchParams(search);
    if (value) next.set(name, value);
    else next.delete(name);
    next.delete('flash');
    const q = next.toString();
    navigate(`/conversations${q ? `?${q}` : ''}`, { replace: true });
  };

  // Several refreshes can overlap a "Show more": never show a conversation twice.
  const seen = new Set<string>();
  const rows = pages.flat().filter((c) => !seen.has(c.id) && seen.add(c.id));
  const filtered = Boolean(status || agentFilter);

  return (
    <section className="page">
      <Flash />
      <div className="page-header">
        <h1>Conversations</h1>
        <div className="filters">
          <label className="filter">
            <span className="label">Status</span>
            <select value={status ?? ''} onChange={(e) => setFilter('status', e.target.value)}>
              <option value="">All</option>
              {STATUSES.map((s) => (
                <option key={s} value={s}>
                  {s}
                </option>
              ))}
            </select>
          </label>
          <label className="filter">
            <span className="label">Agent</span>
            <select value={agentFilter ?? ''} onChange={(e) => setFilter('agent', e.target.value)}>
              <option value="">All</option>
              {(agents.data ?? []).map((a) => (
                <option key={a.id} value={a.id}>
                  {a.name}
                </option>
              ))}
            </select>
          </label>
        </div>
      </div>
      <ErrorNotice error={error} />
      {loading && rows.length === 0 ? (
        <p className="loading">Loading…</p>
      ) : rows.length === 0 ? (
        <div className="empty">
          {filtered ? (
            <p>No conversation matches these filters.</p>
          ) : agents.data?.length === 0 ? (
            <p>
              No conversations yet. A conversation runs an agent: create an agent first, then start one with{' '}
              <kbd>n</kbd>.
            </p>
          ) : (
            <>
              <p>No conversations yet.</p>
              <button type="button" className="btn btn-primary" onClick={openNewConversation}>
                Start a conversation
              </button>
            </>
          )}
        </div>
      ) : (
        <ul className="conv-list" aria-label="Conversations">
          {rows.map((c) => (
            <li key={c.id}>
              <Link
                href={`/conversations/${c.id}`}
                className={c.unread ? 'conv-row conv-unread' : 'conv-row'}
              >
                <span className="conv-dot" aria-hidden="true" />
                <span className="conv-title">
                  {c.unread && <span className="visually-hidden">Unread: </span>}
                  {c.title || 'Untitled'}
                </span>
                <span className="conv-meta">
                  <StatusBadge status={c.status} />
                  <span className="conv-agent">
                    {(c.agent_id && agentNames.get(c.agent_id)) ?? 'deleted agent'}
                  </span>
                  {c.source === 'sandbox' && <span className="tag">sub-conversation</span>}
                  <time dateTime={c.last_activity_at} title={new Date(c.last_activity_at).toLocaleString()}>
                    {relativeTime(c.last_activity_at)}
                  </time>
                </span>
              </Link>
            </li>
          ))}
        </ul>
      )}
      {cursor && rows.length > 0 && (
        <p>
          <button type="button" className="btn" onClick={more}>
            Show more
          </button>
        </p>
      )}
    </section>
  );
}
