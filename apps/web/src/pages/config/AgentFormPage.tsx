// Create or edit an agent: runtime and model, environment, vault allowlist, system prompt,
// skills and MCP servers as structured editors. String values of skills and MCP servers may
// reference `${VAR}` (a variable or secret of the environment or an allowed vault, substituted
// when the sandbox starts): the form lists the references it finds and whether the selected
// environment and vaults define them.
import { type FormEvent, lazy, Suspense, useEffect, useMemo, useState } from 'react';
import { type ApiData, api } from '../../api/client';
import { useApi } from '../../api/use-api';
import { navigate, useParams } from '../../app/router';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { Field } from '../../ui/Field';
import { KeylessNotice, keyless } from '../../ui/KeylessNotice';
import { ConfigNav } from './ConfigNav';
import {
  errorsUnder,
  FieldMessages,
  fieldErrorsOf,
  fromPairs,
  KeyValueEditor,
  ListEditor,
  type Pairs,
  Section,
  toPairs,
} from './editors';
import { MODEL_HINT, MODEL_SUGGESTIONS, modelMismatch, RUNTIMES, type Runtime } from './models';

const CodeEditor = lazy(() => import('./CodeEditor'));

type Agent = ApiData<'/api/agents/{id}'>;

type Skill =
  | { kind: 'inline'; name: string; content: string }
  | { kind: 'source'; source: string; ref: string };
type McpServer = { name: string; command: string; args: string[]; env: Pairs };

interface Draft {
  name: string;
  description: string;
  runtime: Runtime;
  model: string;
  environmentId: string;
  vaultIds: string[];
  system: string;
  skills: Skill[];
  mcp: McpServer[];
  metadata: Record<string, unknown>;
}

const EMPTY: Draft = {
  name: '',
  description: '',
  runtime: 'claude',
  model: '',
  environmentId: '',
  vaultIds: [],
  system: '',
  skills: [],
  mcp: [],
  metadata: {},
};

function draftOf(a: Agent): Draft {
  return {
    name: a.name,
    description: a.description ?? '',
    runtime: a.runtime,
    model: a.model,
    environmentId: a.environment_id ?? '',
    vaultIds: a.vault_ids,
    system: a.system ?? '',
    skills: a.skills.map((s) =>
      s.source !== undefined
        ? { kind: 'source', source: s.source, ref: s.ref ?? '' }
        : { kind: 'inline', name: s.name ?? '', content: s.content ?? '' },
    ),
    mcp: Object.entries(a.mcp_servers).map(([name, s]) => ({
      name,
      command: s.command,
      args: s.args,
      env: toPairs(s.env),
    })),
    metadata: a.metadata,
  };
}

function bodyOf(d: Draft) {
  return {
    name: d.name.trim(),
    description: d.description.trim() ? d.description.trim() : null,
    runtime: d.runtime,
    model: d.model.trim(),
    environment_id: d.environmentId || null,
    vault_ids: d.vaultIds,
    system: d.system.trim() ? d.system : null,
    skills: d.skills.map((s) =>
      s.kind === 'inline'
        ? { name: s.name.trim(), content: s.content }
        : { source: s.source.trim(), ref: s.ref.trim() },
    ),
    mcp_servers: Object.fromEntries(
      d.mcp.map((m) => [m.name.trim(), { command: m.command, args: m.args, env: fromPairs(m.env) }]),
    ),
    metadata: d.metadata,
  };
}

const REF = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/** `${VAR}` names referenced by the skills and MCP servers (after `$$` escapes). */
function referencesOf(d: Draft): string[] {
  const texts = [
    ...d.skills.flatMap((s) => (s.kind === 'inline' ? [s.content] : [s.source, s.ref])),
    ...d.mcp.flatMap((m) => [m.command, ...m.args, ...m.env.map(([, v]) => v)]),
  ];
  const names = new Set<string>();
  for (const t of texts) for (const m of t.replaceAll('$$', '').matchAll(REF)) names.add(m[1]!);
  return [...names].sort();
}

export default function AgentFormPage() {
  const { id } = useParams();
  const editing = id !== undefined;
  const [agent, setAgent] = useState<Agent | null>(null);
  const [draft, setDraft] = useState<Draft>(EMPTY);
  const [loadError, setLoadError] = useState<unknown>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const [saved, setSaved] = useState(false);
  const errors = fieldErrorsOf(error);
  // Said as soon as it is typed, and the save waits for a model the runtime runs.
  const mismatch = modelMismatch(draft.runtime, draft.model.trim());
  const environments = useApi((signal) => api.get('/api/environments', { signal }).then((r) => r.data), []);
  const vaults = useApi((signal) => api.get('/api/vaults', { signal }).then((r) => r.data), []);
  // Where its turns would get their provider key (without a vault: a conversation may start
  // with none); asked once the model is one the runtime runs.
  const model = draft.model.trim();
  const credential = useApi(
    (signal) =>
      model && !mismatch
        ? api.get('/api/account/inference-credentials/check', {
            query: {
              runtime: draft.runtime,
              model,
              ...(draft.environmentId ? { environment_id: draft.environmentId } : {}),
            },
            signal,
          })
        : Promise.resolve(null),
    [draft.runtime, model, mismatch, draft.environmentId],
  );
  const missingKey = keyless(credential.data);

  useEffect(() => {
    if (!id) return;
    const controller = new AbortController();
    api
      .get('/api/agents/{id}', { path: { id }, signal: controller.signal })
      .then((a) => {
        setAgent(a);
        setDraft(draftOf(a));
      })
      .catch((err: unknown) => {
        if (!controller.signal.aborted) setLoadError(err);
      });
    return () => controller.abort();
  }, [id]);

  // Names the environment and allowed vaults define, for the ${VAR} hints (keys only).
  const known = useApi(
    async (signal) => {
      const names = new Map<string, string>();
      const env = environments.data?.find((e) => e.id === draft.environmentId);
      if (env) {
        for (const k of Object.keys(env.env_vars)) names.set(k, `variable of ${env.name}`);
        const s = await api.get('/api/environments/{id}/secrets', { path: { id: env.id }, signal });
        for (const x of s.data) names.set(x.key, `secret of ${env.name}`);
      }
      for (const vid of draft.vaultIds) {
        const v = vaults.data?.find((x) => x.id === vid);
        if (!v) continue;
        const s = await api.get('/api/vaults/{id}/secrets', { path: { id: vid }, signal });
        for (const x of s.data) names.set(x.key, `secret of vault ${v.name}`);
      }
      return names;
    },
    [draft.environmentId, draft.vaultIds.join(','), environments.data, vaults.data],
  );
  const references = useMemo(() => referencesOf(draft), [draft]);

  const patch = (p: Partial<Draft>) => {
    setSaved(false);
    setDraft((d) => ({ ...d, ...p }));
  };
  const setSkill = (i: number, s: Skill) => patch({ skills: draft.skills.map((x, j) => (j === i ? s : x)) });
  const setMcp = (i: number, m: Partial<McpServer>) =>
    patch({ mcp: draft.mcp.map((x, j) => (j === i ? { ...x, ...m } : x)) });

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    if (mismatch) {
      document.getElementById('agent-model')?.focus();
      return;
    }
    setBusy(true);
    setError(null);
    try {
      const body = bodyOf(draft);
      if (id) {
        const updated = await api.put('/api/agents/{id}', { path: { id }, body });
        setAgent(updated);
        setDraft(draftOf(updated));
        setSaved(true);
      } else {
        const created = await api.post('/api/agents', { body });
        navigate(`/agents/${created.id}`, { replace: true });
      }
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const remove = async () => {
    if (!id || !window.confirm(`Delete the agent ${agent?.name}?`)) return;
    try {
      await api.delete('/api/agents/{id}', { path: { id } });
      navigate('/agents');
    } catch (err) {
      setError(err);
    }
  };

  if (loadError) return <ErrorNotice error={loadError} />;
  if (editing && !agent) return <p className="loading">Loading…</p>;

  return (
    <section className="page">
      <ConfigNav />
      <div className="page-header">
        <h1>{editing ? `Agent ${agent?.name}` : 'New agent'}</h1>
      </div>
      <form className="stack" onSubmit={submit} noValidate>
        <ErrorNotice error={Object.keys(errors).length ? null : error} />
        {Object.keys(errors).length > 0 && (
          <div className="notice notice-error" role="alert">
            The agent was not saved: see the messages next to the fields.
          </div>
        )}
        <div className="form-grid">
          <Field
            label="Name"
            required
            value={draft.name}
            onChange={(e) => patch({ name: e.target.value })}
            errors={errorsUnder(errors, 'name')}
          />
          <div className="field">
            <label htmlFor="agent-runtime">Runtime</label>
            <select
              id="agent-runtime"
              value={draft.runtime}
              onChange={(e) => patch({ runtime: e.target.value as Runtime })}
            >
              {RUNTIMES.map((r) => (
                <option key={r} value={r}>
                  {r}
                </option>
              ))}
            </select>
            <FieldMessages messages={errorsUnder(errors, 'runtime')} />
          </div>
          <Field
            id="agent-model"
            label="Model"
            className="mono"
            required
            list="agent-model-suggestions"
            autoComplete="off"
            value={draft.model}
            placeholder={MODEL_SUGGESTIONS[draft.runtime][0]}
            hint={MODEL_HINT[draft.runtime]}
            onChange={(e) => patch({ model: e.target.value })}
            errors={mismatch ? [mismatch] : errorsUnder(errors, 'model')}
          />
          <datalist id="agent-model-suggestions">
            {MODEL_SUGGESTIONS[draft.runtime].map((m) => (
              <option key={m} value={m} />
            ))}
          </datalist>
        </div>
        <Field
          label="Description"
          value={draft.description}
          onChange={(e) => patch({ description: e.target.value })}
          errors={errorsUnder(errors, 'description')}
        />
        <Section title="Environment and vaults">
          <div className="field">
            <label htmlFor="agent-environment">Environment</label>
            <select
              id="agent-environment"
              value={draft.environmentId}
              onChange={(e) => patch({ environmentId: e.target.value })}
            >
              <option value="">None (bare sandbox)</option>
              {environments.data?.map((e) => (
                <option key={e.id} value={e.id}>
                  {e.name}
                </option>
              ))}
            </select>
            <FieldMessages messages={errorsUnder(errors, 'environment_id')} />
          </div>
          <fieldset className="plain-fieldset">
            <legend className="label">Vault allowlist</legend>
            <p className="field-hint">
              A conversation of this agent may be started with one of these vaults.
            </p>
            {vaults.data?.length === 0 && <p className="muted">No vaults yet.</p>}
            {vaults.data?.map((v) => (
              <label key={v.id} className="check">
                <input
                  type="checkbox"
                  checked={draft.vaultIds.includes(v.id)}
                  onChange={(e) =>
                    patch({
                      vaultIds: e.target.checked
                        ? [...draft.vaultIds, v.id]
                        : draft.vaultIds.filter((x) => x !== v.id),
                    })
                  }
                />
                {v.name}
              </label>
            ))}
            <FieldMessages messages={errorsUnder(errors, 'vault_ids')} />
          </fieldset>
          {missingKey && <KeylessNotice missing={missingKey} where="the vault a conversation starts with" />}
        </Section>
        <Suspense fallback={<p className="loading">Loading editor…</p>}>
          <CodeEditor
            label="System prompt"
            value={draft.system}
            rows={8}
            onChange={(system) => patch({ system })}
            errors={errorsUnder(errors, 'system')}
          />
        </Suspense>

        <Section
          title="Skills"
          hint="Inline: a SKILL.md written here. From a repository: owner/repo at a tag, branch or commit."
        >
          {draft.skills.map((s, i) => (
            // biome-ignore lint/suspicious/noArrayIndexKey: rows are edited in place by position
            <div className="mcp-server" key={i}>
              {s.kind === 'inline' ? (
                <>
                  <Field
                    label={`Skill ${i + 1} name`}
                    className="mono"
                    value={s.name}
                    placeholder="lint"
                    onChange={(e) => setSkill(i, { ...s, name: e.target.value })}
                    errors={errorsUnder(errors, `skills.${i}.name`)}
                  />
                  <Suspense fallback={<p className="loading">Loading editor…</p>}>
                    <CodeEditor
                      label={`Skill ${i + 1} SKILL.md`}
                      value={s.content}
                      rows={6}
                      onChange={(content) => setSkill(i, { ...s, content })}
                      errors={errorsUnder(errors, `skills.${i}.content`)}
                    />
                  </Suspense>
                </>
              ) : (
                <div className="form-grid">
                  <Field
                    label={`Skill ${i + 1} source`}
                    className="mono"
                    value={s.source}
                    placeholder="owner/repo"
                    onChange={(e) => setSkill(i, { ...s, source: e.target.value })}
                    errors={errorsUnder(errors, `skills.${i}.source`)}
                  />
                  <Field
                    label={`Skill ${i + 1} ref`}
                    className="mono"
                    value={s.ref}
                    placeholder="v1.2.0"
                    onChange={(e) => setSkill(i, { ...s, ref: e.target.value })}
                    errors={errorsUnder(errors, `skills.${i}.ref`)}
                  />
                </div>
              )}
              <FieldMessages messages={errors[`skills.${i}`] ?? []} />
              <div>
                <button
                  type="button"
                  className="btn btn-small btn-ghost"
                  onClick={() => patch({ skills: draft.skills.filter((_, j) => j !== i) })}
                >
                  Remove skill {i + 1}
                </button>
              </div>
            </div>
          ))}
          <div className="form-actions">
            <button
              type="button"
              className="btn btn-small"
              onClick={() => patch({ skills: [...draft.skills, { kind: 'inline', name: '', content: '' }] })}
            >
              Add inline skill
            </button>
            <button
              type="button"
              className="btn btn-small"
              onClick={() => patch({ skills: [...draft.skills, { kind: 'source', source: '', ref: '' }] })}
            >
              Add skill from a repository
            </button>
          </div>
          <FieldMessages messages={errors['skills'] ?? []} />
        </Section>
        <Section
          title="MCP servers"
          hint={
            <>
              Values may use <code>{`$${'{'}VAR}`}</code> for a variable or secret of the environment or an
              allowed vault, substituted when the sandbox starts; <code>$$</code> is a literal <code>$</code>.
            </>
          }
        >
          {draft.mcp.map((m, i) => (
            // biome-ignore lint/suspicious/noArrayIndexKey: rows are edited in place by position
            <div className="mcp-server" key={i}>
              <div className="form-grid">
                <Field
                  label={`Server ${i + 1} name`}
                  className="mono"
                  value={m.name}
                  placeholder="github"
                  onChange={(e) => setMcp(i, { name: e.target.value })}
                  errors={errorsUnder(errors, `mcp_servers.${m.name.trim()}`).filter((x) => !x.includes(':'))}
                />
                <Field
                  label={`Server ${i + 1} command`}
                  className="mono"
                  value={m.command}
                  placeholder="npx"
                  onChange={(e) => setMcp(i, { command: e.target.value })}
                  errors={errorsUnder(errors, `mcp_servers.${m.name.trim()}.command`)}
                />
              </div>
              <span className="label">Arguments</span>
              <ListEditor
                label={`Server ${i + 1} argument`}
                items={m.args}
                placeholder="-y"
                onChange={(args) => setMcp(i, { args })}
                errors={errorsUnder(errors, `mcp_servers.${m.name.trim()}.args`)}
              />
              <span className="label">Environment</span>
              <KeyValueEditor
                label={`Server ${i + 1} variable`}
                pairs={m.env}
                keyPlaceholder="NAME"
                valuePlaceholder={`$${'{'}SECRET_NAME}`}
                onChange={(env) => setMcp(i, { env })}
                errors={errorsUnder(errors, `mcp_servers.${m.name.trim()}.env`)}
              />
              <div>
                <button
                  type="button"
                  className="btn btn-small btn-ghost"
                  onClick={() => patch({ mcp: draft.mcp.filter((_, j) => j !== i) })}
                >
                  Remove server {i + 1}
                </button>
              </div>
            </div>
          ))}
          <div>
            <button
              type="button"
              className="btn btn-small"
              onClick={() => patch({ mcp: [...draft.mcp, { name: '', command: '', args: [], env: [] }] })}
            >
              Add MCP server
            </button>
          </div>
          <FieldMessages messages={errors['mcp_servers'] ?? []} />
          {references.length > 0 && (
            <div className="field">
              <span className="label">References</span>
              <ul className="plain-list" aria-label="Variable references">
                {references.map((r) => {
                  const where = known.data?.get(r);
                  return (
                    <li key={r}>
                      <code>{`\${${r}}`}</code>{' '}
                      {where ? (
                        <span className="muted">— {where}</span>
                      ) : (
                        <span className="field-error">
                          — not defined by the environment or allowed vaults (the run fails unless the chosen
                          vault has it)
                        </span>
                      )}
                    </li>
                  );
                })}
              </ul>
            </div>
          )}
        </Section>
        <div className="form-actions">
          <button type="submit" className="btn btn-primary" disabled={busy}>
            {busy ? 'Saving…' : editing ? 'Save changes' : 'Create agent'}
          </button>
          {saved && (
            <span role="status" className="muted">
              Saved.
            </span>
          )}
          {editing && (
            <button type="button" className="btn btn-danger" onClick={remove}>
              Delete agent
            </button>
          )}
        </div>
      </form>
    </section>
  );
}
