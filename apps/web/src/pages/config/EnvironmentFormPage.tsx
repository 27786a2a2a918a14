// Create or edit an environment: variables, packages, repositories, the setup script (in the
// lazily loaded code editor), networking with its allowlist, write-only secrets, and building
// a checkpoint with its progress. PUT replaces every field, so fields this form does not edit
// (metadata) are sent back as read.
import { type FormEvent, lazy, Suspense, useEffect, useState } from 'react';
import { type ApiData, api, errorMessage } from '../../api/client';
import { navigate, useParams } from '../../app/router';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { Field } from '../../ui/Field';
import { ConfigNav } from './ConfigNav';
import {
  errorsUnder,
  FieldMessages,
  fieldErrorsOf,
  fromPairs,
  KeyValueEditor,
  ListEditor,
  type Pairs,
  ScrollBox,
  SecretsPanel,
  Section,
  toPairs,
} from './editors';

const CodeEditor = lazy(() => import('./CodeEditor'));

type Environment = ApiData<'/api/environments/{id}'>;
type Repo = { url: string; ref: string; token_secret: string };
const MANAGERS = ['apt', 'npm', 'pip'] as const;

interface Draft {
  name: string;
  envVars: Pairs;
  packages: Record<(typeof MANAGERS)[number], string>;
  repos: Repo[];
  setupScript: string;
  networking: 'unrestricted' | 'limited';
  hosts: string[];
  metadata: Record<string, unknown>;
}

const EMPTY: Draft = {
  name: '',
  envVars: [],
  packages: { apt: '', npm: '', pip: '' },
  repos: [],
  setupScript: '',
  networking: 'unrestricted',
  hosts: [],
  metadata: {},
};

function draftOf(e: Environment): Draft {
  return {
    name: e.name,
    envVars: toPairs(e.env_vars),
    packages: { apt: e.packages['apt'] ?? '', npm: e.packages['npm'] ?? '', pip: e.packages['pip'] ?? '' },
    repos: e.repos.map((r) => ({ url: r.url, ref: r.ref ?? '', token_secret: r.token_secret ?? '' })),
    setupScript: e.setup_script ?? '',
    networking: e.networking_type,
    hosts: e.networking_config.allowed_hosts,
    metadata: e.metadata,
  };
}

function bodyOf(d: Draft) {
  return {
    name: d.name.trim(),
    env_vars: fromPairs(d.envVars),
    packages: Object.fromEntries(
      MANAGERS.filter((m) => d.packages[m].trim()).map((m) => [m, d.packages[m].trim()]),
    ),
    repos: d.repos.map((r) => ({
      url: r.url.trim(),
      ...(r.ref.trim() ? { ref: r.ref.trim() } : {}),
      ...(r.token_secret.trim() ? { token_secret: r.token_secret.trim() } : {}),
    })),
    setup_script: d.setupScript.trim() ? d.setupScript : null,
    networking_type: d.networking,
    networking_config: { allowed_hosts: d.hosts.map((h) => h.trim()).filter(Boolean) },
    metadata: d.metadata,
  };
}

export default function EnvironmentFormPage() {
  const { id } = useParams();
  const editing = id !== undefined;
  const [env, setEnv] = useState<Environment | null>(null);
  const [draft, setDraft] = useState<Draft>(EMPTY);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [saved, setSaved] = useState(false);
  const errors = fieldErrorsOf(error);

  useEffect(() => {
    if (!id) return;
    const controller = new AbortController();
    api
      .get('/api/environments/{id}', { path: { id }, signal: controller.signal })
      .then((e) => {
        setEnv(e);
        setDraft(draftOf(e));
      })
      .catch((err: unknown) => {
        if (!controller.signal.aborted) setLoadError(err);
      });
    return () => controller.abort();
  }, [id]);

  const patch = (p: Partial<Draft>) => {
    setSaved(false);
    setDraft((d) => ({ ...d, ...p }));
  };

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const body = bodyOf(draft);
      if (id) {
        const updated = await api.put('/api/environments/{id}', { path: { id }, body });
        setEnv(updated);
        setDraft(draftOf(updated));
        setSaved(true);
      } else {
        const created = await api.post('/api/environments', { body });
        navigate(`/environments/${created.id}`, { replace: true });
      }
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  const remove = async () => {
    if (!id || !window.confirm(`Delete the environment ${env?.name}? Its secrets are deleted with it.`))
      return;
    try {
      await api.delete('/api/environments/{id}', { path: { id } });
      navigate('/environments');
    } catch (err) {
      setError(err);
    }
  };

  if (loadError) return <ErrorNotice error={loadError} />;
  if (editing && !env) return <p className="loading">Loading…</p>;
  const setRepo = (i: number, r: Partial<Repo>) =>
    patch({ repos: draft.repos.map((x, j) => (j === i ? { ...x, ...r } : x)) });

  return (
    <section className="page">
      <ConfigNav />
      <div className="page-header">
        <h1>{editing ? `Environment ${env?.name}` : 'New environment'}</h1>
      </div>
      <form className="stack" onSubmit={submit} noValidate>
        <ErrorNotice error={Object.keys(errors).length ? null : error} />
        {Object.keys(errors).length > 0 && (
          <div className="notice notice-error" role="alert">
            The environment was not saved: see the messages next to the fields.
          </div>
        )}
        <Field
          label="Name"
          name="name"
          required
          value={draft.name}
          onChange={(e) => patch({ name: e.target.value })}
          hint="Letters, digits, '.', '_' and '-'; unique among your environments."
          errors={errorsUnder(errors, 'name')}
        />
        <Section
          title="Environment variables"
          hint="Plain values, visible to anyone with access. Use secrets for credentials."
        >
          <KeyValueEditor
            label="Variable"
            pairs={draft.envVars}
            onChange={(envVars) => patch({ envVars })}
            keyPlaceholder="NAME"
            errors={errorsUnder(errors, 'env_vars')}
          />
        </Section>
        <Section title="Packages" hint="Space-separated specs per manager, installed on a cold start.">
          <div className="form-grid">
            {MANAGERS.map((m) => (
              <Field
                key={m}
                label={m}
                className="mono"
                value={draft.packages[m]}
                placeholder={m === 'apt' ? 'ripgrep jq' : m === 'npm' ? 'typescript@5.9.3' : 'requests>=2.31'}
                onChange={(e) => patch({ packages: { ...draft.packages, [m]: e.target.value } })}
                errors={errorsUnder(errors, `packages.${m}`)}
              />
            ))}
          </div>
          <FieldMessages messages={errors['packages'] ?? []} />
        </Section>
        <Section
          title="Repositories"
          hint="https:// clone URLs; a private one names the secret holding its token."
        >
          {draft.repos.map((r, i) => (
            // biome-ignore lint/suspicious/noArrayIndexKey: rows are edited in place by position
            <div className="form-grid" key={i}>
              <Field
                label={`Repository ${i + 1} URL`}
                className="mono"
                value={r.url}
                placeholder="https://github.com/acme/app.git"
                onChange={(e) => setRepo(i, { url: e.target.value })}
                errors={errorsUnder(errors, `repos.${i}.url`)}
              />
              <Field
                label="Ref (branch, tag or SHA)"
                className="mono"
                value={r.ref}
                onChange={(e) => setRepo(i, { ref: e.target.value })}
                errors={errorsUnder(errors, `repos.${i}.ref`)}
              />
              <Field
                label="Token secret"
                className="mono"
                value={r.token_secret}
                placeholder="GITHUB_TOKEN"
                onChange={(e) => setRepo(i, { token_secret: e.target.value })}
                errors={errorsUnder(errors, `repos.${i}.token_secret`)}
              />
              <div className="form-actions">
                <button
                  type="button"
                  className="btn btn-small btn-ghost"
                  onClick={() => patch({ repos: draft.repos.filter((_, j) => j !== i) })}
                >
                  Remove repository {i + 1}
                </button>
              </div>
            </div>
          ))}
          <div>
            <button
              type="button"
              className="btn btn-small"
              onClick={() => patch({ repos: [...draft.repos, { url: '', ref: '', token_secret: '' }] })}
            >
              Add repository
            </button>
          </div>
          <FieldMessages messages={errors['repos'] ?? []} />
        </Section>
        <Section title="Setup script" hint="Runs with bash after the clone, in the sandbox user's home.">
          <Suspense fallback={<p className="loading">Loading editor…</p>}>
            <CodeEditor
              label="Setup script"
              value={draft.setupScript}
              onChange={(setupScript) => patch({ setupScript })}
              errors={errorsUnder(errors, 'setup_script')}
            />
          </Suspense>
        </Section>
        <Section title="Networking">
          <div className="field">
            <label htmlFor="networking-type">Outbound network</label>
            <select
              id="networking-type"
              value={draft.networking}
              onChange={(e) => patch({ networking: e.target.value as Draft['networking'] })}
            >
              <option value="unrestricted">Unrestricted</option>
              <option value="limited">Limited to an allowlist</option>
            </select>
          </div>
          {draft.networking === 'limited' && (
            <>
              <p className="field-hint">
                Hosts the sandbox may reach; <code>*.example.com</code> allows every subdomain. With none,
                nothing is allowed.
              </p>
              <ListEditor
                label="Allowed host"
                items={draft.hosts}
                onChange={(hosts) => patch({ hosts })}
                placeholder="github.com"
                errors={errorsUnder(errors, 'networking_config')}
              />
            </>
          )}
          <FieldMessages messages={errorsUnder(errors, 'networking_type')} />
        </Section>
        <div className="form-actions">
          <button type="submit" className="btn btn-primary" disabled={busy}>
            {busy ? 'Saving…' : editing ? 'Save changes' : 'Create environment'}
          </button>
          {saved && (
            <span role="status" className="muted">
              Saved.
            </span>
          )}
          {editing && (
            <button type="button" className="btn btn-danger" onClick={remove}>
              Delete environment
            </button>
          )}
        </div>
      </form>
      {editing && id && env && (
        <div className="stack section-gap">
          <SecretsPanel owner="environments" id={id} />
          <CheckpointPanel environment={env} onBuilt={(e) => setEnv(e)} />
        </div>
      )}
    </section>
  );
}

type CheckpointEvent =
  | { type: 'stage'; stage: string; state: string; duration_ms?: number; message?: string | null }
  | { type: 'stdout' | 'stderr'; text: string }
  | { type: 'done'; environment: Environment }
  | { type: 'error'; error: string; message: string };

/** POST /api/environments/:id/checkpoint read as NDJSON: one line of progress per event. */
function CheckpointPanel({
  environment,
  onBuilt,
}: {
  environment: Environment;
  onBuilt: (e: Environment) => void;
}) {
  const [lines, setLines] = useState<string[]>([]);
  const [state, setState] = useState<'idle' | 'running' | 'done' | 'failed'>('idle');
  const [message, setMessage] = useState('');

  const build = async () => {
    setLines([]);
    setState('running');
    setMessage('');
    const push = (line: string) => setLines((l) => [...l.slice(-400), line]);
    try {
      const res = await fetch(`/api/environments/${encodeURIComponent(environment.id)}/checkpoint`, {
        method: 'POST',
        credentials: 'same-origin',
        headers: { accept: 'application/x-ndjson' },
      });
      if (!res.ok || !res.body) {
        const body = (await res.json().catch(() => null)) as { message?: string } | null;
        throw new Error(body?.message ?? `The server answered ${res.status}.`);
      }
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = '';
      let finished = false;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let nl = buffer.indexOf('\n');
        while (nl >= 0) {
          const line = buffer.slice(0, nl).trim();
          buffer = buffer.slice(nl + 1);
          nl = buffer.indexOf('\n');
          if (!line) continue;
          const event = JSON.parse(line) as CheckpointEvent;
          if (event.type === 'stage') {
            const took =
              event.duration_ms !== undefined ? ` (${(event.duration_ms / 1000).toFixed(1)} s)` : '';
            push(`▸ ${event.stage} ${event.state}${took}${event.message ? `: ${event.message}` : ''}`);
          } else if (event.type === 'stdout' || event.type === 'stderr') {
            push(event.text.replace(/\n$/, ''));
          } else if (event.type === 'done') {
            finished = true;
            setState('done');
            onBuilt(event.environment);
          } else if (event.type === 'error') {
            finished = true;
            setState('failed');
            setMessage(event.message);
          }
        }
      }
      if (!finished) {
        setState('failed');
        setMessage('The connection closed before the checkpoint finished.');
      }
    } catch (err) {
      setState('failed');
      setMessage(errorMessage(err));
    }
  };

  return (
    <Section
      title="Checkpoint"
      hint="A checkpoint is the sandbox after packages, clone and setup: conversations start from it warm. It is cleared when packages, repositories or the setup script change."
    >
      <p>
        {environment.checkpoint_id ? (
          <span className="tag tag-ok">checkpoint ready</span>
        ) : (
          <span className="tag">no checkpoint</span>
        )}
      </p>
      <div className="form-actions">
        <button type="button" className="btn" onClick={build} disabled={state === 'running'}>
          {state === 'running' ? 'Building checkpoint…' : 'Create checkpoint'}
        </button>
        <span role="status" className={state === 'failed' ? 'field-error' : 'muted'}>
          {state === 'done' ? 'Checkpoint created.' : state === 'failed' ? `Failed: ${message}` : ''}
        </span>
      </div>
      {lines.length > 0 && <ScrollBox label="Checkpoint progress">{lines.join('\n')}</ScrollBox>}
    </Section>
  );
}
