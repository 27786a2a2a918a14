// Export the account's resources as a manifest (YAML, secrets as ${env:KEY} placeholders) and
// import one: parsed here, previewed with POST /api/apply?dry_run=true (the server's own
// verdict per resource and secret, plus the fields that change), applied only after that.
import './config.css';
import { useId, useState } from 'react';
import { api } from '../../api/client';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { ConfigNav } from './ConfigNav';
import { ScrollBox, Section } from './editors';
import {
  type CompiledResource,
  changedFields,
  type ManifestDocument,
  parseManifest,
  resolveSecrets,
  toYaml,
} from './manifest';

type ApplyAnswer = Awaited<ReturnType<typeof applyManifest>>;

function applyManifest(resources: CompiledResource[], dryRun: boolean) {
  return api.post('/api/apply', {
    query: { dry_run: dryRun ? 'true' : 'false' },
    body: { resources },
  });
}

export default function ManifestPage() {
  const [exported, setExported] = useState<string | null>(null);
  const [exportError, setExportError] = useState<unknown>(null);
  const [copied, setCopied] = useState(false);
  const [text, setText] = useState('');
  const [values, setValues] = useState<Record<string, string>>({});
  const [problems, setProblems] = useState<string[]>([]);
  const [plan, setPlan] = useState<{
    body: CompiledResource[];
    answer: ApplyAnswer;
    changes: string[][];
  } | null>(null);
  const [applied, setApplied] = useState<ApplyAnswer | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const textId = useId();
  const parsed = text.trim() ? parseManifest(text) : null;

  const doExport = async () => {
    setExportError(null);
    setCopied(false);
    try {
      const res = await api.get('/api/apply/export');
      setExported(toYaml(res.documents as ManifestDocument[]));
    } catch (err) {
      setExportError(err);
    }
  };
  const download = () => {
    if (exported === null) return;
    const url = URL.createObjectURL(new Blob([exported], { type: 'application/yaml' }));
    const a = document.createElement('a');
    a.href = url;
    a.download = 'paddock-manifest.yaml';
    a.click();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  };

  const invalidate = () => {
    setPlan(null);
    setApplied(null);
  };

  const preview = async () => {
    setError(null);
    setApplied(null);
    if (!parsed) return;
    setProblems(parsed.problems);
    if (parsed.problems.length > 0) return;
    setBusy(true);
    try {
      const body = resolveSecrets(parsed.resources, values);
      const [answer, current] = await Promise.all([applyManifest(body, true), api.get('/api/apply/export')]);
      const byName = new Map(current.documents.map((d) => [`${d.kind}/${d.metadata.name}`, d.spec]));
      const changes = body.map((r) => changedFields(byName.get(`${r.kind}/${r.name}`), r.spec));
      setPlan({ body, answer, changes });
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const apply = async () => {
    if (!plan) return;
    setBusy(true);
    setError(null);
    try {
      setApplied(await applyManifest(plan.body, false));
      setPlan(null);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section className="page">
      <ConfigNav />
      <div className="page-header">
        <h1>Export / import</h1>
      </div>
      <div className="stack">
        <Section
          title="Export"
          hint="Your environments, vaults and agents as one YAML manifest, the format `paddock apply -f` reads. Secret values are never exported: each appears as ${env:KEY}."
        >
          <div className="form-actions">
            <button type="button" className="btn btn-primary" onClick={doExport}>
              Export manifest
            </button>
            {exported !== null && (
              <>
                <button type="button" className="btn" onClick={download}>
                  Download paddock-manifest.yaml
                </button>
                <button
                  type="button"
                  className="btn"
                  onClick={async () => {
                    await navigator.clipboard.writeText(exported);
                    setCopied(true);
                  }}
                >
                  Copy
                </button>
                <button
                  type="button"
                  className="btn btn-ghost"
                  onClick={() => {
                    setText(exported);
                    invalidate();
                  }}
                >
                  Use as import
                </button>
                <span role="status" className="muted">
                  {copied ? 'Copied.' : ''}
                </span>
              </>
            )}
          </div>
          <ErrorNotice error={exportError} />
          {exported !== null && <ScrollBox label="Exported manifest">{exported}</ScrollBox>}
        </Section>

        <Section
          title="Import"
          hint="Paste a manifest or choose a file. Nothing changes until you have seen the preview and applied it; apply never deletes anything."
        >
          <div className="field">
            <label htmlFor={textId}>Manifest (YAML)</label>
            <textarea
              id={textId}
              className="mono"
              rows={10}
              spellCheck={false}
              value={text}
              onChange={(e) => {
                setText(e.target.value);
                invalidate();
              }}
            />
          </div>
          <div className="field">
            <label htmlFor={`${textId}-file`}>Or a file</label>
            <input
              id={`${textId}-file`}
              type="file"
              accept=".yaml,.yml,application/yaml,text/yaml"
              onChange={async (e) => {
                const file = e.target.files?.[0];
                if (file) {
                  setText(await file.text());
                  invalidate();
                }
              }}
            />
          </div>
          {parsed && parsed.placeholders.length > 0 && (
            <fieldset className="plain-fieldset">
              <legend className="label">Secret values</legend>
              <p className="field-hint">
                The manifest refers to these as <code>{`$${'{'}env:NAME}`}</code>. Type a value to set it;
                leave it empty to keep the value already stored.
              </p>
              {parsed.placeholders.map((name) => (
                <div className="kv-row kv-row-single" key={name}>
                  <input
                    type="password"
                    autoComplete="off"
                    aria-label={`Value for ${name}`}
                    placeholder={name}
                    className="mono"
                    value={values[name] ?? ''}
                    onChange={(e) => {
                      setValues((v) => ({ ...v, [name]: e.target.value }));
                      invalidate();
                    }}
                  />
                </div>
              ))}
            </fieldset>
          )}
          {problems.length > 0 && (
            <div className="notice notice-error" role="alert">
              <p>The manifest cannot be read:</p>
              <ul>
                {problems.map((p) => (
                  <li key={p}>{p}</li>
                ))}
              </ul>
            </div>
          )}
          <ErrorNotice error={error} />
          <div className="form-actions">
            <button type="button" className="btn" onClick={preview} disabled={!parsed || busy}>
              Preview changes
            </button>
            <button type="button" className="btn btn-primary" onClick={apply} disabled={!plan || busy}>
              Apply
            </button>
          </div>
          {plan && (
            <Results title="Preview (nothing applied yet)" answer={plan.answer} changes={plan.changes} />
          )}
          {applied && <Results title="Applied" answer={applied} />}
        </Section>
      </div>
    </section>
  );
}

function Results({ title, answer, changes }: { title: string; answer: ApplyAnswer; changes?: string[][] }) {
  const { summary } = answer;
  return (
    <div className="stack" role="status">
      <h2 className="h3">{title}</h2>
      <p>
        {summary.created} to create · {summary.updated} to update · {summary.unchanged} unchanged ·{' '}
        {summary.error} with errors
      </p>
      <div className="table-wrap">
        <table className="data-table">
          <thead>
            <tr>
              <th scope="col">Kind</th>
              <th scope="col">Name</th>
              <th scope="col">Outcome</th>
              <th scope="col">Details</th>
            </tr>
          </thead>
          <tbody>
            {answer.results.map((r, i) => (
              <tr key={`${r.kind}/${r.name}`}>
                <td>{r.kind}</td>
                <td>{r.name}</td>
                <td className={`diff-${r.action}`}>{r.action}</td>
                <td>
                  {changes?.[i]?.length ? <div>changes {changes[i]!.join(', ')}</div> : null}
                  {r.secrets && Object.keys(r.secrets).length > 0 && (
                    <div>
                      secrets:{' '}
                      {Object.entries(r.secrets)
                        .map(([k, o]) => `${k} ${o}`)
                        .join(', ')}
                    </div>
                  )}
                  {r.errors &&
                    Object.entries(r.errors).map(([field, messages]) => (
                      <div key={field} className="field-error">
                        <code>{field}</code>: {messages.join('; ')}
                      </div>
                    ))}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </div>
  );
}
