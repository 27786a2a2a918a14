// "Push branch": commits the agent's uncommitted work in the live sandbox and pushes it as a
// branch, optionally opening a pull request (POST /api/conversations/:id/push). The dialog is
// prefilled with what the server would do by default (GET …/push: the repositories, the branch,
// the message from the latest prompt); the server's refusals are shown as it words them.
import { type FormEvent, useEffect, useId, useState } from 'react';
import { api } from '../../api/client';
import { Dialog } from '../../ui/Dialog';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { Field } from '../../ui/Field';

type Plan = Awaited<ReturnType<typeof loadPlan>>;
type Result = Awaited<ReturnType<typeof push>>;

const loadPlan = (id: string) => api.get('/api/conversations/{id}/push', { path: { id } });
const push = (id: string, body: PushBody) => api.post('/api/conversations/{id}/push', { path: { id }, body });

interface PushBody {
  repo?: string;
  branch?: string;
  message?: string;
  pull_request?: boolean;
}

export function PushButton({
  conversationId,
  disabled,
  onPushed,
}: {
  conversationId: string;
  disabled: boolean;
  onPushed: () => void;
}) {
  const [open, setOpen] = useState(false);
  return (
    <>
      <button
        type="button"
        className="btn"
        disabled={disabled}
        onClick={() => setOpen(true)}
        title={disabled ? 'Wait for the turn to end' : "Push the agent's work as a branch"}
      >
        Push branch
      </button>
      <Dialog open={open} onClose={() => setOpen(false)} title="Push a branch" wide>
        {open && (
          <PushForm conversationId={conversationId} onPushed={onPushed} onClose={() => setOpen(false)} />
        )}
      </Dialog>
    </>
  );
}

function PushForm({
  conversationId,
  onPushed,
  onClose,
}: {
  conversationId: string;
  onPushed: () => void;
  onClose: () => void;
}) {
  const [plan, setPlan] = useState<Plan | null>(null);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [repo, setRepo] = useState('');
  const [branch, setBranch] = useState('');
  const [message, setMessage] = useState('');
  const [openPr, setOpenPr] = useState(true);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const [result, setResult] = useState<Result | null>(null);
  const messageId = useId();
  const repoId = useId();
  const prId = useId();

  useEffect(() => {
    let live = true;
    loadPlan(conversationId).then(
      (p) => {
        if (!live) return;
        setPlan(p);
        const first = p.repos[0];
        setRepo(first?.repo ?? '');
        setBranch(first?.branch ?? '');
        setMessage(p.message);
      },
      (err: unknown) => live && setLoadError(err),
    );
    return () => {
      live = false;
    };
  }, [conversationId]);

  if (loadError) return <ErrorNotice error={loadError} />;
  if (!plan) return <p className="loading">Loading…</p>;
  const chosen = plan.repos.find((r) => r.repo === repo);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const body: PushBody = {
        ...(plan.repos.length > 1 ? { repo } : {}),
        ...(branch.trim() !== '' ? { branch: branch.trim() } : {}),
        ...(message.trim() !== '' && message !== plan.message ? { message } : {}),
        ...(openPr ? { pull_request: true } : {}),
      };
      setResult(await push(conversationId, body));
      onPushed();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  if (result) {
    const pr = result.pull_request;
    return (
      <div className="stack" role="status">
        <p>
          {result.push.committed ? 'Committed and pushed' : 'Pushed'} <code>{result.push.branch}</code> (
          <code>{result.push.commit.slice(0, 12)}</code>) to {result.push.remote}.
        </p>
        {pr && (
          <p>
            {pr.created ? 'Opened' : 'Already open:'}{' '}
            <a href={pr.url} target="_blank" rel="noreferrer">
              {pr.provider === 'gitlab' ? `merge request !${pr.number}` : `pull request #${pr.number}`}
            </a>{' '}
            into <code>{pr.base}</code>
          </p>
        )}
        <div className="dialog-actions">
          <button type="button" className="btn btn-primary" onClick={onClose}>
            Done
          </button>
        </div>
      </div>
    );
  }

  return (
    <form onSubmit={submit} className="stack">
      {!plan.ready && plan.reason && (
        <div className="notice notice-warn" role="note">
          {plan.reason}
        </div>
      )}
      {plan.repos.length > 1 ? (
        <div className="field">
          <label htmlFor={repoId}>Repository</label>
          <select
            id={repoId}
            value={repo}
            onChange={(e) => {
              setRepo(e.target.value);
              setBranch(plan.repos.find((r) => r.repo === e.target.value)?.branch ?? '');
            }}
          >
            {plan.repos.map((r) => (
              <option key={r.repo} value={r.repo}>
                {r.repo} ({r.remote})
              </option>
            ))}
          </select>
        </div>
      ) : (
        chosen && (
          <p>
            Repository <code>{chosen.repo}</code> → {chosen.remote}
          </p>
        )
      )}
      {chosen && !chosen.has_token && (
        <div className="notice notice-warn" role="note">
          This repository has no access token: add one to the environment's repository (a secret named in its
          token_secret, with contents:write and pull_requests:write) to push.
        </div>
      )}
      <Field
        label="Branch"
        value={branch}
        onChange={(e) => setBranch(e.target.value)}
        hint="A new branch on the remote; pushing again to the same one updates it (and its pull request)."
        spellCheck={false}
        autoComplete="off"
      />
      <div className="field">
        <label htmlFor={messageId}>Commit message</label>
        <textarea
          id={messageId}
          rows={4}
          value={message}
          onChange={(e) => setMessage(e.target.value)}
          aria-describedby={`${messageId}-hint`}
        />
        <p id={`${messageId}-hint`} className="field-hint">
          For what the agent left uncommitted; from the latest prompt unless you change it.
        </p>
      </div>
      <div className="check">
        <input id={prId} type="checkbox" checked={openPr} onChange={(e) => setOpenPr(e.target.checked)} />
        <label htmlFor={prId}>Open a pull request</label>
      </div>
      <ErrorNotice error={error} />
      <div className="dialog-actions">
        <button type="button" className="btn" onClick={onClose}>
          Cancel
        </button>
        <button type="submit" className="btn btn-primary" disabled={busy || !plan.ready}>
          {busy ? 'Pushing…' : openPr ? 'Push and open pull request' : 'Push'}
        </button>
      </div>
    </form>
  );
}
