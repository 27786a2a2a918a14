// API keys (the plaintext shown once, at creation) and the account's inference credentials
// (write-only: a set key shows as set, never its value).
import { type FormEvent, useState } from 'react';
import { api } from '../../api/client';
import { useApi } from '../../api/use-api';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { Field } from '../../ui/Field';
import { relativeTime } from '../../ui/time';
import { errorsUnder, fieldErrorsOf, Section } from '../config/editors';
import { AccountNav } from './AccountNav';
import { DataExport } from './DataExport';
import { DeleteAccount } from './DeleteAccount';
import UsageBlock from './UsageBlock';

export default function AccountPage() {
  return (
    <section className="page">
      <AccountNav />
      <div className="page-header">
        <h1>API keys and credentials</h1>
      </div>
      <div className="stack">
        <ApiKeys />
        <InferenceCredentials />
        <UsageBlock />
        <DataExport />
        <DeleteAccount />
      </div>
    </section>
  );
}

function ApiKeys() {
  const list = useApi((signal) => api.get('/api/auth/api-keys', { signal }), []);
  const [name, setName] = useState('');
  const [days, setDays] = useState('');
  const [created, setCreated] = useState<{ name: string; key: string } | null>(null);
  const [copied, setCopied] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const errors = fieldErrorsOf(error);

  const create = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    setCopied(false);
    try {
      const key = await api.post('/api/auth/api-keys', {
        body: { name: name.trim(), ...(days ? { expires_in_days: Number(days) } : {}) },
      });
      setCreated({ name: key.name, key: key.key });
      setName('');
      setDays('');
      list.reload();
    } catch (err) {
      setError(err);
    }
  };
  const revoke = async (id: string, keyName: string) => {
    if (!window.confirm(`Revoke the key ${keyName}? Anything using it stops working at once.`)) return;
    try {
      await api.delete('/api/auth/api-keys/{id}', { path: { id } });
      list.reload();
    } catch (err) {
      setError(err);
    }
  };
  const keys = (list.data?.data ?? []).filter((k) => k.scope === 'full');
  return (
    <Section title="API keys" hint="For the CLI and your scripts: send it as Authorization: Bearer <key>.">
      <ErrorNotice error={list.error ?? (Object.keys(errors).length ? null : error)} />
      {created && (
        <div className="notice notice-ok" role="status">
          <p>
            Key <strong>{created.name}</strong> created. Copy it now: it is not shown again.
          </p>
          <p>
            <span className="visually-hidden">New API key: </span>
            <code className="plaintext-key">{created.key}</code>
          </p>
          <div className="form-actions">
            <button
              type="button"
              className="btn btn-small"
              onClick={async () => {
                await navigator.clipboard.writeText(created.key);
                setCopied(true);
              }}
            >
              Copy key
            </button>
            <button type="button" className="btn btn-small btn-ghost" onClick={() => setCreated(null)}>
              I have stored it
            </button>
            <span className="muted">{copied ? 'Copied.' : ''}</span>
          </div>
        </div>
      )}
      <form className="form-grid" onSubmit={create}>
        <Field
          label="Key name"
          value={name}
          required
          placeholder="laptop CLI"
          onChange={(e) => setName(e.target.value)}
          errors={errorsUnder(errors, 'name')}
        />
        <Field
          label="Expires after (days)"
          type="number"
          min={1}
          max={3650}
          value={days}
          hint="Empty: never expires."
          onChange={(e) => setDays(e.target.value)}
          errors={errorsUnder(errors, 'expires_in_days')}
        />
        <div className="form-actions">
          <button type="submit" className="btn btn-primary">
            Create key
          </button>
        </div>
      </form>
      {keys.length > 0 ? (
        <div className="table-wrap">
          <table className="data-table data-table-stack">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Prefix</th>
                <th scope="col" className="hide-narrow">
                  Last used
                </th>
                <th scope="col" className="hide-narrow">
                  Expires
                </th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {keys.map((k) => (
                <tr key={k.id}>
                  <td>{k.name}</td>
                  <td>
                    <code>{k.prefix}…</code>
                  </td>
                  <td className="hide-narrow">{k.last_used_at ? relativeTime(k.last_used_at) : 'never'}</td>
                  <td className="hide-narrow">
                    {k.expires_at ? new Date(k.expires_at).toLocaleDateString() : 'never'}
                  </td>
                  <td>
                    <button
                      type="button"
                      className="btn btn-small btn-danger"
                      onClick={() => revoke(k.id, k.name)}
                    >
                      Revoke<span className="visually-hidden"> {k.name}</span>
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : (
        <p className="muted">{list.loading ? 'Loading…' : 'No API keys.'}</p>
      )}
    </Section>
  );
}

function InferenceCredentials() {
  const list = useApi((signal) => api.get('/api/account/inference-credentials', { signal }), []);
  const [editing, setEditing] = useState<string | null>(null);
  const [key, setKey] = useState('');
  const [baseUrl, setBaseUrl] = useState('');
  const [error, setError] = useState<unknown>(null);
  const errors = fieldErrorsOf(error);

  const save = async (e: FormEvent) => {
    e.preventDefault();
    if (!editing) return;
    setError(null);
    try {
      await api.put('/api/account/inference-credentials/{provider}', {
        path: { provider: editing as never },
        body: { api_key: key, ...(baseUrl.trim() ? { base_url: baseUrl.trim() } : {}) },
      });
      setEditing(null);
      setKey('');
      list.reload();
    } catch (err) {
      setError(err);
    }
  };
  const remove = async (provider: string) => {
    if (!window.confirm(`Delete your ${provider} key?`)) return;
    try {
      await api.delete('/api/account/inference-credentials/{provider}', {
        path: { provider: provider as never },
      });
      list.reload();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <Section
      title="Inference credentials"
      hint="Your own provider keys, given to your agents' sandboxes. Write-only: a stored key is never shown again."
    >
      <ErrorNotice error={list.error ?? (Object.keys(errors).length ? null : error)} />
      <ul className="secret-list" aria-label="Inference providers">
        {list.data?.data.map((c) => (
          <li key={c.provider} className="secret-row">
            <strong>{c.provider}</strong>
            {c.set ? <span className="tag tag-ok">set</span> : <span className="tag">not set</span>}
            {c.base_url && <code className="muted">{c.base_url}</code>}
            <span className="row-actions">
              <button
                type="button"
                className="btn btn-small"
                onClick={() => {
                  setEditing(c.provider);
                  setKey('');
                  setBaseUrl(c.base_url ?? '');
                  setError(null);
                }}
              >
                {c.set ? 'Replace' : 'Set'}
                <span className="visually-hidden"> {c.provider} key</span>
              </button>
              {c.set && (
                <button type="button" className="btn btn-small btn-danger" onClick={() => remove(c.provider)}>
                  Remove<span className="visually-hidden"> {c.provider} key</span>
                </button>
              )}
            </span>
          </li>
        ))}
      </ul>
      {editing && (
        <form className="form-grid" onSubmit={save}>
          <Field
            label={`${editing} API key`}
            type="password"
            autoComplete="off"
            required
            value={key}
            onChange={(e) => setKey(e.target.value)}
            errors={errorsUnder(errors, 'api_key')}
          />
          <Field
            label="Base URL (optional)"
            className="mono"
            value={baseUrl}
            placeholder="https://…"
            onChange={(e) => setBaseUrl(e.target.value)}
            errors={errorsUnder(errors, 'base_url')}
          />
          <div className="form-actions">
            <button type="submit" className="btn btn-primary">
              Save key
            </button>
            <button type="button" className="btn" onClick={() => setEditing(null)}>
              Cancel
            </button>
          </div>
        </form>
      )}
    </Section>
  );
}
