// The Changes tab (issue 41): what the agent changed in the sandbox's repositories. "All
// changes" reads the live sandbox (GET /api/conversations/:id/changes, then one file's diff when
// it is chosen) and follows a running turn (re-read every few seconds, and when a turn ends); a
// turn of the filter shows what that turn changed as recorded after it, also once the sandbox is
// reclaimed. The diff is shown unified or split, highlighted (highlight.ts). Loaded lazily: the
// highlighter never weighs on the console's first load.
import { type ReactNode, useEffect, useMemo, useState } from 'react';
import { ApiError, api } from '../../api/client';
import { useApi } from '../../api/use-api';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { type DiffLine, parsePatch, splitRows } from './diff-model';
import { highlightLine, languageOf } from './highlight';

interface ChangedFile {
  path: string;
  old_path: string | null;
  status: 'added' | 'modified' | 'deleted' | 'renamed' | 'type_changed';
  additions: number;
  deletions: number;
  binary: boolean;
  committed: boolean;
  patch?: string | null;
  patch_omitted?: 'binary' | 'too_large' | null;
}

interface Repository {
  dir: string;
  origin: 'cloned' | 'created';
  url: string | null;
  base: string;
  files: ChangedFile[];
  additions: number;
  deletions: number;
  truncated_files: number;
  missing: boolean;
}

export interface ChangesTurn {
  id: string;
  seq: number;
  status: string;
  prompt: string;
}

const LETTER: Record<ChangedFile['status'], string> = {
  added: 'A',
  modified: 'M',
  deleted: 'D',
  renamed: 'R',
  type_changed: 'T',
};

/** How often "All changes" is re-read while a turn runs. */
const LIVE_POLL_MS = 3000;

function Code({ line, language }: { line: DiffLine | null; language: string | null }) {
  if (!line) return <td className="diff-code diff-empty" />;
  return (
    <td
      className={`diff-code diff-${line.kind}`}
      // highlightLine escapes the text (highlight.js's output, or ours): never markup of the file's.
      // biome-ignore lint/security/noDangerouslySetInnerHtml: escaped above
      dangerouslySetInnerHTML={{ __html: highlightLine(line.text, language) || ' ' }}
    />
  );
}

const SIGN: Record<string, string> = { add: '+', del: '−', context: ' ', hunk: '', meta: '' };

function Diff({ file, view }: { file: ChangedFile; view: 'unified' | 'split' }) {
  const lines = useMemo(() => (file.patch ? parsePatch(file.patch) : []), [file.patch]);
  const language = languageOf(file.path);
  if (file.binary || file.patch_omitted === 'binary')
    return <p className="muted diff-note">Binary file: not shown.</p>;
  if (file.patch_omitted === 'too_large')
    return (
      <p className="muted diff-note">
        This diff is too large to show inline (+{file.additions} −{file.deletions}).
      </p>
    );
  if (file.patch === undefined) return <p className="loading">Loading the diff…</p>;
  const body = lines.filter((l) => l.kind !== 'meta' || /^(rename|new|deleted|old|similarity)/.test(l.text));
  if (view === 'split') {
    return (
      <table className="diff diff-split" aria-label={`Changes to ${file.path}, old and new side by side`}>
        <tbody>
          {splitRows(body).map((row, n) =>
            row.kind !== 'pair' ? (
              // biome-ignore lint/suspicious/noArrayIndexKey: rows of one patch, never reordered
              <tr key={n} className={`diff-row-${row.kind}`}>
                <td colSpan={4} className={`diff-code diff-${row.kind}`}>
                  {row.left?.text}
                </td>
              </tr>
            ) : (
              // biome-ignore lint/suspicious/noArrayIndexKey: rows of one patch, never reordered
              <tr key={n}>
                <td className="diff-no">{row.left?.oldNo ?? ''}</td>
                <Code line={row.left} language={language} />
                <td className="diff-no">{row.right?.newNo ?? ''}</td>
                <Code line={row.right} language={language} />
              </tr>
            ),
          )}
        </tbody>
      </table>
    );
  }
  return (
    <table className="diff" aria-label={`Changes to ${file.path}`}>
      <tbody>
        {body.map((line, n) =>
          line.kind === 'hunk' || line.kind === 'meta' ? (
            // biome-ignore lint/suspicious/noArrayIndexKey: rows of one patch, never reordered
            <tr key={n}>
              <td colSpan={4} className={`diff-code diff-${line.kind}`}>
                {line.text}
              </td>
            </tr>
          ) : (
            // biome-ignore lint/suspicious/noArrayIndexKey: rows of one patch, never reordered
            <tr key={n}>
              <td className="diff-no">{line.oldNo ?? ''}</td>
              <td className="diff-no">{line.newNo ?? ''}</td>
              <td className={`diff-sign diff-${line.kind}`} aria-hidden="true">
                {SIGN[line.kind]}
              </td>
              <Code line={line} language={language} />
            </tr>
          ),
        )}
      </tbody>
    </table>
  );
}

export default function ChangesTab({
  conversationId,
  turns,
  running,
  actions,
}: {
  conversationId: string;
  turns: ChangesTurn[];
  running: boolean;
  /** What to do with the changes, at the end of the toolbar (the conversation page's Push branch). */
  actions?: ReactNode;
}) {
  const [filter, setFilter] = useState('');
  const [view, setView] = useState<'unified' | 'split'>('unified');
  const [selected, setSelected] = useState<{ repo: string; path: string } | null>(null);
  const [tick, setTick] = useState(0);
  const ended = turns.filter((t) => t.status !== 'queued' && t.status !== 'running').length;

  // Live: re-read while a turn runs, and once more when one ends.
  useEffect(() => {
    if (!running || filter !== '') return;
    const t = setInterval(() => setTick((n) => n + 1), LIVE_POLL_MS);
    return () => clearInterval(t);
  }, [running, filter]);

  const current = useApi(
    (signal) =>
      filter === ''
        ? (api
            .get('/api/conversations/{id}/changes', { path: { id: conversationId }, signal })
            .then((r) => r as { repositories: Repository[] }) as Promise<{ repositories: Repository[] }>)
        : api
            .get('/api/conversations/{id}/turns/{turn_id}/changes', {
              path: { id: conversationId, turn_id: filter },
              signal,
            })
            .then((r) => r as { repositories: Repository[]; status: string }),
    [conversationId, filter, tick, ended],
  );
  const turnStatus = (current.data as { status?: string } | undefined)?.status;
  // A turn's record is written just after it ends: read again until it is.
  useEffect(() => {
    if (turnStatus !== 'recording') return;
    const t = setTimeout(() => setTick((n) => n + 1), 1000);
    return () => clearTimeout(t);
  }, [turnStatus]);

  const repos = current.data?.repositories ?? [];
  const chosen =
    (selected &&
      repos.find((r) => r.dir === selected.repo)?.files.find((f) => f.path === selected.path) &&
      selected) ||
    (repos[0]?.files[0] ? { repo: repos[0].dir, path: repos[0].files[0].path } : null);
  const listed = chosen
    ? repos.find((r) => r.dir === chosen.repo)?.files.find((f) => f.path === chosen.path)
    : undefined;

  // "All changes": the chosen file's diff is read on its own (the list carries stats only).
  const needsPatch = filter === '' && listed !== undefined && !listed.binary;
  const patch = useApi(
    (signal) =>
      needsPatch && chosen
        ? api
            .get('/api/conversations/{id}/changes', {
              path: { id: conversationId },
              query: { repo: chosen.repo, file: chosen.path },
              signal,
            })
            .then((r) => (r as { file: ChangedFile }).file)
        : Promise.resolve(null),
    [conversationId, needsPatch, chosen?.repo, chosen?.path, tick, ended],
  );
  const shown: ChangedFile | undefined =
    listed && filter === '' && !listed.binary
      ? patch.data && patch.data.path === listed.path
        ? patch.data
        : { ...listed, patch: undefined }
      : listed;

  const notRunning = current.error instanceof ApiError && current.error.code === 'sandbox_not_running';
  const total = repos.reduce((n, r) => n + r.files.length, 0);

  return (
    <div className="changes">
      <div className="changes-toolbar">
        <label>
          Show{' '}
          <select value={filter} onChange={(e) => setFilter(e.target.value)}>
            <option value="">All changes{running ? ' (live)' : ''}</option>
            {turns.map((t) => (
              <option key={t.id} value={t.id}>
                Turn {t.seq}: {(t.prompt.split('\n')[0] ?? '').slice(0, 60)}
              </option>
            ))}
          </select>
        </label>
        {/* biome-ignore lint/a11y/useSemanticElements: a pair of toggle buttons, not a form's fieldset */}
        <div className="segmented" role="group" aria-label="Diff layout">
          <button
            type="button"
            className="btn btn-small"
            aria-pressed={view === 'unified'}
            onClick={() => setView('unified')}
          >
            Unified
          </button>
          <button
            type="button"
            className="btn btn-small"
            aria-pressed={view === 'split'}
            onClick={() => setView('split')}
          >
            Split
          </button>
        </div>
        {current.data && (
          <span className="muted" role="status">
            {total} {total === 1 ? 'file' : 'files'} changed
          </span>
        )}
        {actions}
      </div>
      {notRunning ? (
        <p className="notice notice-info">
          The sandbox is not running (reclaimed after being idle, or ended), so its current changes cannot be
          read. Send a prompt to wake it, or choose a turn above: each turn's changes are kept.
        </p>
      ) : (
        <ErrorNotice error={current.error} />
      )}
      {current.data && total === 0 && (
        <p className="muted">
          {filter === '' ? 'No changes in the sandbox’s repositories yet.' : 'This turn changed nothing.'}
          {turnStatus === 'recording' && ' (still being recorded…)'}
        </p>
      )}
      {total > 0 && (
        <div className="changes-grid">
          <nav className="changes-files" aria-label="Changed files">
            {repos.map((repo) => (
              <div key={repo.dir}>
                <h3 title={repo.url ?? undefined}>
                  {repo.dir}{' '}
                  <span className="muted">
                    ({repo.origin === 'cloned' ? 'cloned' : 'created by the agent'})
                  </span>
                </h3>
                <ul>
                  {repo.files.map((f) => {
                    const on = chosen?.repo === repo.dir && chosen.path === f.path;
                    return (
                      <li key={f.path}>
                        <button
                          type="button"
                          className="changes-file"
                          aria-current={on ? 'true' : undefined}
                          onClick={() => setSelected({ repo: repo.dir, path: f.path })}
                          title={f.old_path ? `${f.old_path} → ${f.path}` : f.path}
                        >
                          <span className={`change-letter change-${f.status}`} title={f.status}>
                            {LETTER[f.status]}
                          </span>
                          <span className="changes-path">{f.path}</span>
                          <span className="changes-stat">
                            {f.binary ? (
                              'bin'
                            ) : (
                              <>
                                <span className="stat-add">+{f.additions}</span>{' '}
                                <span className="stat-del">−{f.deletions}</span>
                              </>
                            )}
                          </span>
                        </button>
                      </li>
                    );
                  })}
                  {repo.truncated_files > 0 && <li className="muted">and {repo.truncated_files} more</li>}
                </ul>
              </div>
            ))}
          </nav>
          <div className="changes-diff">
            {shown && (
              <>
                <h3 className="changes-diff-title">
                  {shown.old_path ? `${shown.old_path} → ${shown.path}` : shown.path}{' '}
                  <span className="muted">
                    {shown.status}
                    {shown.committed ? ', committed' : ', uncommitted'}
                  </span>
                </h3>
                <ErrorNotice error={patch.error} />
                <Diff file={shown} view={view} />
              </>
            )}
          </div>
        </div>
      )}
    </div>
  );
}
