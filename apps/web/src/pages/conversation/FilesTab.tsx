// The Files tab: the live sandbox's home as a tree (directories open on click, read through
// GET /api/conversations/:id/files) beside a viewer of the selected file (its redacted text
// from …/files/content), with a download link for the file and a tar.gz of a directory.
// Without a live sandbox the server's 409 says how to wake it; the tab shows that sentence.
import { useCallback, useEffect, useState } from 'react';
import { type ApiData, api, errorMessage } from '../../api/client';
import { ErrorNotice } from '../../ui/ErrorNotice';

type Listing = ApiData<'/api/conversations/{id}/files'>;
type Entry = Listing['entries'][number];

const isDir = (e: Entry) => e.type === 'dir' || (e.type === 'symlink' && e.target_type === 'dir');

function contentUrl(id: string, path: string, extra = ''): string {
  return `/api/conversations/${encodeURIComponent(id)}/files/content?path=${encodeURIComponent(path)}${extra}`;
}

function formatSize(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

function Directory(props: {
  id: string;
  path: string;
  depth: number;
  selected: string | null;
  onSelect(entry: Entry): void;
}) {
  const [listing, setListing] = useState<Listing | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [open, setOpen] = useState<Set<string>>(new Set());
  useEffect(() => {
    const controller = new AbortController();
    api
      .get('/api/conversations/{id}/files', {
        path: { id: props.id },
        query: { path: props.path },
        signal: controller.signal,
      })
      .then(setListing, (err: unknown) => {
        if (!controller.signal.aborted) setError(err);
      });
    return () => controller.abort();
  }, [props.id, props.path]);
  if (error)
    return props.depth === 0 ? <ErrorNotice error={error} /> : <p className="muted">{errorMessage(error)}</p>;
  if (!listing) return <p className="muted">Loading…</p>;
  if (listing.entries.length === 0) return <p className="muted files-empty">Empty directory</p>;
  return (
    <ul className="files-tree" aria-label={props.depth === 0 ? 'Files' : undefined}>
      {listing.entries.map((entry) => {
        const dir = isDir(entry);
        const expanded = open.has(entry.path);
        return (
          <li key={entry.path}>
            <button
              type="button"
              aria-expanded={dir ? expanded : undefined}
              aria-current={props.selected === entry.path ? 'true' : undefined}
              className={`files-entry${props.selected === entry.path ? ' files-selected' : ''}`}
              onClick={() => {
                if (dir) {
                  const next = new Set(open);
                  if (expanded) next.delete(entry.path);
                  else next.add(entry.path);
                  setOpen(next);
                }
                props.onSelect(entry);
              }}
            >
              <span aria-hidden="true">{dir ? (expanded ? '▾ ' : '▸ ') : '  '}</span>
              {entry.name}
              {entry.type === 'symlink' && <span className="muted"> →</span>}
              {!dir && <span className="muted files-size"> {formatSize(entry.size)}</span>}
            </button>
            {dir && expanded && (
              <Directory
                id={props.id}
                path={entry.path}
                depth={props.depth + 1}
                selected={props.selected}
                onSelect={props.onSelect}
              />
            )}
          </li>
        );
      })}
      {listing.truncated && <li className="muted">Only the first 5,000 entries are listed.</li>}
    </ul>
  );
}

function Viewer({ id, entry }: { id: string; entry: Entry }) {
  const [text, setText] = useState<string | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  useEffect(() => {
    setText(null);
    setNotice(null);
    if (isDir(entry)) return;
    const controller = new AbortController();
    fetch(contentUrl(id, entry.path), { signal: controller.signal, credentials: 'same-origin' })
      .then(async (res) => {
        if (!res.ok) {
          const body = (await res.json().catch(() => ({}))) as { message?: string };
          setNotice(body.message ?? `The file could not be read (${res.status}).`);
          return;
        }
        if (res.headers.get('content-type')?.startsWith('application/octet-stream')) {
          await res.body?.cancel();
          setNotice('A binary file: download it to look inside.');
          return;
        }
        setText(await res.text());
      })
      .catch((err: unknown) => {
        if (!controller.signal.aborted) setNotice(errorMessage(err));
      });
    return () => controller.abort();
  }, [id, entry]);
  const dir = isDir(entry);
  return (
    <div className="files-viewer">
      <div className="files-viewer-head">
        <code>{entry.path}</code>
        <a
          className="btn btn-small"
          href={
            dir ? contentUrl(id, entry.path, '&archive=tar.gz') : contentUrl(id, entry.path, '&download=1')
          }
          download
        >
          {dir ? 'Download .tar.gz' : 'Download'}
        </a>
      </div>
      {dir ? (
        <p className="muted">A directory: download it as a tarball (Paddock's own files are left out).</p>
      ) : notice ? (
        <p className="muted">{notice}</p>
      ) : text === null ? (
        <p className="muted">Loading…</p>
      ) : (
        <section
          className="files-content"
          aria-label={`Content of ${entry.path}`}
          // biome-ignore lint/a11y/noNoninteractiveTabindex: the content scrolls with the keyboard
          tabIndex={0}
        >
          <pre>{text}</pre>
        </section>
      )}
    </div>
  );
}

export function FilesTab({ conversationId }: { conversationId: string }) {
  const [selected, setSelected] = useState<Entry | null>(null);
  const [generation, setGeneration] = useState(0);
  const onSelect = useCallback((entry: Entry) => setSelected(entry), []);
  return (
    <div className="files-tab">
      <div className="files-side">
        <div className="files-toolbar">
          <span className="muted">/home/sandbox</span>
          <button type="button" className="btn btn-small" onClick={() => setGeneration((g) => g + 1)}>
            Refresh
          </button>
          <a className="btn btn-small" href={contentUrl(conversationId, '', '&archive=tar.gz')} download>
            Home as .tar.gz
          </a>
        </div>
        <Directory
          key={generation}
          id={conversationId}
          path=""
          depth={0}
          selected={selected?.path ?? null}
          onSelect={onSelect}
        />
      </div>
      {selected ? (
        <Viewer id={conversationId} entry={selected} />
      ) : (
        <p className="muted files-viewer">Select a file to read it (secrets are redacted).</p>
      )}
    </div>
  );
}
