// One conversation, live: header (title, status, agent, sandbox and its lifetime left, the
// conversation that started it, interrupt / terminate / delete), the agent's transcript and the
// raw output (both from the SSE feed), "Push branch" (PushDialog.tsx) and the pull requests opened, the stage timeline, the turns with their usage, the
// sub-conversations it started, and the follow-up prompt.
// The conversation row and its turns are re-read when a stage event arrives (and every few
// seconds while work is under way), so statuses follow the log.
// One word per state (issue 37): while the sandbox provisions the header says "provisioning" and
// nothing else names a status of its own; a failure's reason is said once, in the banner; an
// ended conversation's feed is not "live"; an agent whose provider has no key is warned about
// before its turns fail.
import { lazy, Suspense, useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { ApiError, api } from '../../api/client';
import { useApi } from '../../api/use-api';
import { Link, navigate, useParams } from '../../app/router';
import { Dialog } from '../../ui/Dialog';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { KeylessNotice, keyless } from '../../ui/KeylessNotice';
import { StatusBadge } from '../../ui/StatusBadge';
import { relativeTime } from '../../ui/time';
import { FilesTab } from './FilesTab';
import { LogModel } from './log-model';
import { PromptBox } from './PromptBox';
import { PushButton } from './PushDialog';
import { Reason, shownAbove } from './Reason';
import { type StreamState, useConversationStream } from './stream';
import { Terminal } from './Terminal';
import { Timeline } from './Timeline';
import { Transcript } from './Transcript';
import { Turns } from './Turns';
import { useModelVersion } from './use-model';

const ACTIVE = new Set(['pending', 'running']);

/** The Changes tab and its highlighter: a chunk of its own, loaded when the tab is first shown. */
const ChangesTab = lazy(() => import('./ChangesTab'));
// The terminal (xterm.js) is loaded only when its tab is opened.
const TerminalTab = lazy(() => import('./TerminalTab'));

type TabId = 'transcript' | 'raw' | 'changes' | 'files' | 'terminal';

const STREAM_NOTICE: Partial<Record<StreamState, { tone: string; text: string }>> = {
  reconnecting: { tone: 'warn', text: 'Connection to the live log lost; reconnecting…' },
  owner_lost: {
    tone: 'warn',
    text: 'The server running this conversation is gone. The log resumes here as soon as another server takes it over.',
  },
  gone: { tone: 'error', text: 'The live log is unavailable; retrying…' },
  deleted: { tone: 'error', text: 'This conversation was deleted.' },
};

function LifetimeLeft({
  sandbox,
}: {
  sandbox: { expires_at: string | null; idle_expires_at: string | null };
}) {
  const [, tick] = useState(0);
  useEffect(() => {
    const t = setInterval(() => tick((n) => n + 1), 30_000);
    return () => clearInterval(t);
  }, []);
  const soonest = [sandbox.idle_expires_at, sandbox.expires_at]
    .filter((x): x is string => Boolean(x))
    .sort((a, b) => Date.parse(a) - Date.parse(b))[0];
  if (!soonest) return null;
  const why = soonest === sandbox.idle_expires_at ? 'if idle' : 'max lifetime';
  return (
    <span
      title={`Reclaimed at ${new Date(soonest).toLocaleString()} (${why}); the conversation stays resumable`}
    >
      reclaimed {relativeTime(soonest)} ({why})
    </span>
  );
}

export default function ConversationPage() {
  const { id = '' } = useParams();
  const conversation = useApi((signal) => api.get('/api/conversations/{id}', { path: { id }, signal }), [id]);
  const turns = useApi(
    (signal) => api.get('/api/conversations/{id}/turns', { path: { id }, signal }).then((r) => r.data),
    [id],
  );
  const children = useApi(
    (signal) =>
      api.get('/api/conversations', { query: { parent_id: id, limit: 50 }, signal }).then((r) => r.data),
    [id],
  );
  const parentId = conversation.data?.parent_conversation_id ?? null;
  const parent = useApi(
    (signal) =>
      parentId
        ? api.get('/api/conversations/{id}', { path: { id: parentId }, signal })
        : Promise.resolve(null),
    [parentId],
  );
  const agentId = conversation.data?.agent_id ?? null;
  const agent = useApi(
    (signal) =>
      agentId ? api.get('/api/agents/{id}', { path: { id: agentId }, signal }) : Promise.resolve(null),
    [agentId],
  );
  const vaultId = conversation.data?.vault_id ?? null;
  const credential = useApi(
    (signal) =>
      agentId
        ? api.get('/api/agents/{id}/credential', {
            path: { id: agentId },
            query: vaultId ? { vault_id: vaultId } : {},
            signal,
          })
        : Promise.resolve(null),
    [agentId, vaultId],
  );
  // biome-ignore lint/correctness/useExhaustiveDependencies: one model per conversation
  const model = useMemo(() => new LogModel(), [id]);
  useModelVersion(model);

  const reloadTimer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const { reload: reloadConversation } = conversation;
  const { reload: reloadTurns } = turns;
  const { reload: reloadChildren } = children;
  const refresh = useCallback(() => {
    clearTimeout(reloadTimer.current);
    reloadTimer.current = setTimeout(() => {
      reloadConversation();
      reloadTurns();
      reloadChildren();
    }, 250);
  }, [reloadConversation, reloadTurns, reloadChildren]);
  useEffect(() => () => clearTimeout(reloadTimer.current), []);

  const streamState = useConversationStream(id, model, refresh);

  const status = conversation.data?.status;
  useEffect(() => {
    if (!status || !ACTIVE.has(status)) return;
    const t = setInterval(refresh, 4000);
    return () => clearInterval(t);
  }, [status, refresh]);

  const [tab, setTab] = useState<TabId | null>(null);
  // Usage and session lines alone do not make a transcript worth opening first.
  const hasTranscript = model.transcript.some((i) => i.kind !== 'usage' && i.kind !== 'session');
  const shownTab = tab ?? (hasTranscript ? 'transcript' : 'raw');

  const [confirm, setConfirm] = useState<null | 'terminate' | 'delete'>(null);
  const [actionError, setActionError] = useState<unknown>(null);
  const [acting, setActing] = useState(false);
  const act = async (what: 'interrupt' | 'terminate' | 'delete') => {
    setActing(true);
    setActionError(null);
    try {
      if (what === 'interrupt') await api.post('/api/conversations/{id}/interrupt', { path: { id } });
      if (what === 'terminate') await api.post('/api/conversations/{id}/terminate', { path: { id } });
      if (what === 'delete') {
        await api.delete('/api/conversations/{id}', { path: { id } });
        navigate('/conversations', { replace: true });
        return;
      }
      refresh();
    } catch (err) {
      setActionError(err);
    } finally {
      setActing(false);
      setConfirm(null);
    }
  };

  const turnList = turns.data ?? [];
  const turnSeq = useCallback((turnId: string) => turnList.find((t) => t.id === turnId)?.seq, [turnList]);
  const turnLabel = useCallback(
    (turnId: string) => {
      const t = turnList.find((x) => x.id === turnId);
      if (!t) return 'turn';
      const first = t.prompt.split('\n')[0] ?? '';
      return `turn ${t.seq}: ${first.length > 80 ? `${first.slice(0, 79)}…` : first}`;
    },
    [turnList],
  );

  if (conversation.error instanceof ApiError && conversation.error.status === 404) {
    return (
      <section className="page narrow">
        <h1>Conversation not found</h1>
        <p>It may have been deleted.</p>
        <p>
          <Link href="/conversations">Back to conversations</Link>
        </p>
      </section>
    );
  }
  const c = conversation.data;
  if (!c) {
    return conversation.error ? (
      <ErrorNotice error={conversation.error} />
    ) : (
      <p className="loading">Loading…</p>
    );
  }
  const notice = STREAM_NOTICE[streamState];
  const terminal = c.status === 'terminated' || c.status === 'failed';
  const provisioning = c.status === 'pending';
  // A feed that stays open on an ended conversation has nothing more to bring: not "live".
  const feed = terminal && streamState === 'live' ? 'ended' : streamState;
  const missingKey = terminal ? null : keyless(credential.data);

  return (
    <section className="page conv-page">
      <div className="page-header">
        <h1>{c.title || 'Untitled conversation'}</h1>
        <StatusBadge status={c.status} {...(provisioning ? { label: 'provisioning' } : {})} />
        <div className="conv-actions">
          <PushButton conversationId={c.id} disabled={ACTIVE.has(c.status) || terminal} onPushed={refresh} />
          <button
            type="button"
            className="btn"
            disabled={c.status !== 'running' || acting}
            onClick={() => act('interrupt')}
            title={c.status === 'running' ? 'Stop the running turn' : 'No turn is running'}
          >
            Interrupt
          </button>
          <button
            type="button"
            className="btn btn-danger"
            disabled={terminal || acting}
            onClick={() => setConfirm('terminate')}
          >
            Terminate
          </button>
          <button
            type="button"
            className="btn btn-danger"
            disabled={acting}
            onClick={() => setConfirm('delete')}
          >
            Delete
          </button>
        </div>
      </div>
      <dl className="conv-facts">
        <div>
          <dt>Agent</dt>
          <dd>{agent.data ? `${agent.data.name} (${agent.data.runtime})` : c.agent_id ? '…' : 'deleted'}</dd>
        </div>
        <div>
          <dt>Sandbox</dt>
          <dd>
            {c.sandbox && provisioning ? (
              <span className="muted">being set up (see Stages)</span>
            ) : c.sandbox ? (
              <>
                <StatusBadge status={c.sandbox.status} /> <LifetimeLeft sandbox={c.sandbox} />
                {c.sandbox.reason && !shownAbove(c.sandbox.reason, c.failure_reason) && (
                  <span className="muted"> {c.sandbox.reason}</span>
                )}
              </>
            ) : (
              'none'
            )}
          </dd>
        </div>
        <div>
          <dt>Started</dt>
          <dd>
            <time dateTime={c.created_at} title={new Date(c.created_at).toLocaleString()}>
              {relativeTime(c.created_at)}
            </time>
          </dd>
        </div>
        {c.pull_requests && c.pull_requests.length > 0 && (
          <div>
            <dt>Pull requests</dt>
            <dd>
              <ul className="conv-pulls">
                {c.pull_requests.map((p) => (
                  <li key={`${p.repo}/${p.branch}`}>
                    <a href={p.url} target="_blank" rel="noreferrer">
                      {p.provider === 'gitlab' ? `!${p.number}` : `#${p.number}`}
                    </a>{' '}
                    <code>{p.branch}</code>
                  </li>
                ))}
              </ul>
            </dd>
          </div>
        )}
        {c.parent_conversation_id && (
          <div>
            <dt>Started by</dt>
            <dd>
              <Link href={`/conversations/${c.parent_conversation_id}`}>
                {parent.data ? parent.data.title || 'Untitled conversation' : 'parent conversation'}
              </Link>
            </dd>
          </div>
        )}
      </dl>
      {c.failure_reason && (
        <div className="notice notice-error" role="alert">
          This conversation failed: <Reason text={c.failure_reason} />{' '}
          {shownTab !== 'raw' && (
            <button type="button" className="btn btn-small" onClick={() => setTab('raw')}>
              Show the raw output
            </button>
          )}
        </div>
      )}
      {missingKey && <KeylessNotice missing={missingKey} where="this conversation's vault" />}
      <ErrorNotice error={actionError} />
      {notice && (
        <div className={`notice notice-${notice.tone}`} role="status" data-stream={streamState}>
          {notice.text}
        </div>
      )}
      {model.truncated && (
        <div className="notice notice-warn" role="note">
          Log truncated: {model.truncated}
        </div>
      )}

      <div className="conv-grid">
        <div className="conv-main">
          <div className="tabs">
            <div className="tablist" role="tablist" aria-label="Conversation views">
              {[
                // The log's two views.
                [
                  { id: 'transcript' as const, label: `Transcript${hasTranscript ? '' : ' (none yet)'}` },
                  { id: 'raw' as const, label: 'Raw output' },
                ],
                // The agent's work out of the sandbox (issue 41).
                [
                  { id: 'changes' as const, label: 'Changes' },
                  { id: 'files' as const, label: 'Files' },
                  { id: 'terminal' as const, label: 'Terminal' },
                ],
              ]
                .flat()
                .map((t) => (
                  <button
                    key={t.id}
                    type="button"
                    role="tab"
                    id={`tab-${t.id}`}
                    aria-controls={`panel-${t.id}`}
                    aria-selected={shownTab === t.id}
                    className="tab"
                    onClick={() => setTab(t.id)}
                  >
                    {t.label}
                  </button>
                ))}
            </div>
            <span className={`live-dot live-${feed}`} role="status">
              {feed.replace('_', ' ')}
            </span>
          </div>
          <div
            id="panel-transcript"
            role="tabpanel"
            aria-labelledby="tab-transcript"
            hidden={shownTab !== 'transcript'}
          >
            {hasTranscript ? (
              <Transcript model={model} turns={turnList} />
            ) : (
              <p className="muted tx-empty">
                The agent's parsed messages appear here when its runtime reports them; the raw output has
                everything.
              </p>
            )}
          </div>
          <div id="panel-raw" role="tabpanel" aria-labelledby="tab-raw" hidden={shownTab !== 'raw'}>
            <Terminal model={model} turnLabel={turnLabel} />
          </div>
          <div
            id="panel-changes"
            role="tabpanel"
            aria-labelledby="tab-changes"
            hidden={shownTab !== 'changes'}
          >
            {shownTab === 'changes' && (
              <Suspense fallback={<p className="loading">Loading…</p>}>
                <ChangesTab
                  conversationId={c.id}
                  turns={turnList}
                  running={c.status === 'running'}
                  actions={
                    <PushButton
                      conversationId={c.id}
                      disabled={ACTIVE.has(c.status) || terminal}
                      onPushed={refresh}
                    />
                  }
                />
              </Suspense>
            )}
          </div>
          <div id="panel-files" role="tabpanel" aria-labelledby="tab-files" hidden={shownTab !== 'files'}>
            {shownTab === 'files' && <FilesTab conversationId={c.id} />}
          </div>
          <div
            id="panel-terminal"
            role="tabpanel"
            aria-labelledby="tab-terminal"
            hidden={shownTab !== 'terminal'}
          >
            {tab === 'terminal' && (
              <Suspense fallback={<p className="muted">Loading the terminal…</p>}>
                <TerminalTab
                  conversationId={c.id}
                  live={c.status !== 'terminated' && c.status !== 'failed'}
                />
              </Suspense>
            )}
          </div>
          {/* The banner above says why it failed: the prompt box only says what to do. */}
          <PromptBox conversationId={c.id} status={c.status} failure={null} onSent={refresh} />
        </div>
        <aside className="conv-side" aria-label="Stages and turns">
          <h2>Stages</h2>
          <Timeline model={model} turnSeq={turnSeq} failure={c.failure_reason} />
          <h2>Turns</h2>
          <Turns turns={turnList} provisioning={provisioning} failure={c.failure_reason} />
          {children.data && children.data.length > 0 && (
            <>
              <h2>Sub-conversations</h2>
              <ul className="conv-children">
                {children.data.map((child) => (
                  <li key={child.id}>
                    <Link href={`/conversations/${child.id}`}>{child.title || 'Untitled conversation'}</Link>{' '}
                    <StatusBadge status={child.status} />
                  </li>
                ))}
              </ul>
            </>
          )}
        </aside>
      </div>

      <Dialog
        open={confirm !== null}
        onClose={() => setConfirm(null)}
        title={confirm === 'delete' ? 'Delete this conversation?' : 'Terminate this conversation?'}
      >
        <p>
          {confirm === 'delete'
            ? 'Its sandbox is destroyed and its turns and log are removed. This cannot be undone.'
            : 'Its sandbox is destroyed and it takes no more prompts. The log stays readable.'}
        </p>
        <div className="dialog-actions">
          <button type="button" className="btn" onClick={() => setConfirm(null)}>
            Cancel
          </button>
          <button
            type="button"
            className="btn btn-danger"
            disabled={acting}
            onClick={() => confirm && act(confirm)}
          >
            {confirm === 'delete' ? 'Delete' : 'Terminate'}
          </button>
        </div>
      </Dialog>
    </section>
  );
}
