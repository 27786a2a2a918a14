// Structured editors shared by the configuration forms: key/value maps, string lists, the
// API's field errors next to the part of the form they name, and the write-only secrets panel.
import './config.css';
import { type ReactNode, useId, useState } from 'react';
import { ApiError, api, errorMessage } from '../../api/client';
import { useApi } from '../../api/use-api';
import { ErrorNotice } from '../../ui/ErrorNotice';

export type FieldErrors = Record<string, string[]>;

export function fieldErrorsOf(error: unknown): FieldErrors {
  return error instanceof ApiError && error.body.errors ? error.body.errors : {};
}

/** The messages for `path` and everything under it, each prefixed by the part below `path`. */
export function errorsUnder(errors: FieldErrors, path: string): string[] {
  const out: string[] = [];
  for (const [key, messages] of Object.entries(errors)) {
    if (key === path) out.push(...messages);
    else if (key.startsWith(`${path}.`))
      out.push(...messages.map((m) => `${key.slice(path.length + 1)}: ${m}`));
  }
  return out;
}

export function FieldMessages({ messages }: { messages: string[] }) {
  if (messages.length === 0) return null;
  return (
    <ul className="field-messages" role="alert">
      {messages.map((m) => (
        <li key={m}>{m}</li>
      ))}
    </ul>
  );
}

export function Section({ title, hint, children }: { title: string; hint?: ReactNode; children: ReactNode }) {
  const id = useId();
  return (
    <fieldset className="form-section" aria-labelledby={id}>
      <legend id={id}>{title}</legend>
      {hint && <p className="field-hint">{hint}</p>}
      {children}
    </fieldset>
  );
}

/** Preformatted output that scrolls; focusable so keyboard users can scroll it too. */
export function ScrollBox({ label, children }: { label: string; children: ReactNode }) {
  return (
    // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard (axe scrollable-region-focusable)
    <pre className="progress-log" title={label} tabIndex={0}>
      {children}
    </pre>
  );
}

export type Pairs = Array<[string, string]>;

export const toPairs = (map: Record<string, string> | undefined): Pairs => Object.entries(map ?? {});
export const fromPairs = (pairs: Pairs): Record<string, string> =>
  Object.fromEntries(pairs.filter(([k]) => k.trim() !== '').map(([k, v]) => [k.trim(), v]));

/** Rows of name → value. */
export function KeyValueEditor({
  label,
  pairs,
  onChange,
  keyLabel = 'Name',
  valueLabel = 'Value',
  keyPlaceholder,
  valuePlaceholder,
  errors,
}: {
  label: string;
  pairs: Pairs;
  onChange: (pairs: Pairs) => void;
  keyLabel?: string;
  valueLabel?: string;
  keyPlaceholder?: string;
  valuePlaceholder?: string;
  errors?: string[];
}) {
  const set = (i: number, k: string, v: string) => onChange(pairs.map((p, j) => (j === i ? [k, v] : p)));
  return (
    <div className="kv-editor">
      {pairs.map(([k, v], i) => (
        // biome-ignore lint/suspicious/noArrayIndexKey: rows are edited in place by position
        <div className="kv-row" key={i}>
          <input
            aria-label={`${label} ${i + 1} ${keyLabel.toLowerCase()}`}
            placeholder={keyPlaceholder ?? keyLabel}
            className="mono"
            value={k}
            onChange={(e) => set(i, e.target.value, v)}
          />
          <input
            aria-label={`${label} ${i + 1} ${valueLabel.toLowerCase()}`}
            placeholder={valuePlaceholder ?? valueLabel}
            className="mono"
            value={v}
            onChange={(e) => set(i, k, e.target.value)}
          />
          <button
            type="button"
            className="btn btn-ghost btn-small"
            aria-label={`Remove ${label} ${i + 1}`}
            onClick={() => onChange(pairs.filter((_, j) => j !== i))}
          >
            ✕
          </button>
        </div>
      ))}
      <button type="button" className="btn btn-small" onClick={() => onChange([...pairs, ['', '']])}>
        Add {label.toLowerCase()}
      </button>
      <FieldMessages messages={errors ?? []} />
    </div>
  );
}

/** A list of strings, one input each. */
export function ListEditor({
  label,
  items,
  onChange,
  placeholder,
  errors,
}: {
  label: string;
  items: string[];
  onChange: (items: string[]) => void;
  placeholder?: string;
  errors?: string[];
}) {
  return (
    <div className="kv-editor">
      {items.map((item, i) => (
        // biome-ignore lint/suspicious/noArrayIndexKey: rows are edited in place by position
        <div className="kv-row kv-row-single" key={i}>
          <input
            aria-label={`${label} ${i + 1}`}
            placeholder={placeholder}
            className="mono"
            value={item}
            onChange={(e) => onChange(items.map((x, j) => (j === i ? e.target.value : x)))}
          />
          <button
            type="button"
            className="btn btn-ghost btn-small"
            aria-label={`Remove ${label} ${i + 1}`}
            onClick={() => onChange(items.filter((_, j) => j !== i))}
          >
            ✕
          </button>
        </div>
      ))}
      <button type="button" className="btn btn-small" onClick={() => onChange([...items, ''])}>
        Add {label.toLowerCase()}
      </button>
      <FieldMessages messages={errors ?? []} />
    </div>
  );
}

/**
 * Secrets of an environment or a vault, write-only: the API lists keys, never values, and so
 * does this panel. A value typed here is sent once and the field is cleared.
 */
export function SecretsPanel({ owner, id }: { owner: 'environments' | 'vaults'; id: string }) {
  const list = useApi(
    (signal) =>
      owner === 'environments'
        ? api.get('/api/environments/{id}/secrets', { path: { id }, signal })
        : api.get('/api/vaults/{id}/secrets', { path: { id }, signal }),
    [owner, id],
  );
  const [key, setKey] = useState('');
  const [value, setValue] = useState('');
  const [replacing, setReplacing] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const errors = fieldErrorsOf(error);

  const save = async (k: string, v: string) => {
    setBusy(true);
    setError(null);
    try {
      const body = { key: k, value: v };
      if (owner === 'environments') await api.post('/api/environments/{id}/secrets', { path: { id }, body });
      else await api.post('/api/vaults/{id}/secrets', { path: { id }, body });
      setKey('');
      setValue('');
      setReplacing(null);
      list.reload();
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };
  const remove = async (k: string) => {
    if (!window.confirm(`Remove the secret ${k}? Runs that use it will no longer get it.`)) return;
    setError(null);
    try {
      if (owner === 'environments')
        await api.delete('/api/environments/{id}/secrets/{key}', { path: { id, key: k } });
      else await api.delete('/api/vaults/{id}/secrets/{key}', { path: { id, key: k } });
      list.reload();
    } catch (err) {
      setError(err);
    }
  };

  return (
    <Section
      title="Secrets"
      hint="Write-only: a stored value is never shown again, here or in any answer of the API. Reference one in agent configs as ${KEY}."
    >
      <ErrorNotice error={Object.keys(errors).length ? null : error} />
      {list.data && list.data.data.length > 0 ? (
        <ul className="secret-list" aria-label="Stored secrets">
          {list.data.data.map((s) => (
            <li key={s.key} className="secret-row">
              <code>{s.key}</code>
              <span className="tag tag-ok">set</span>
              {replacing === s.key ? (
                <form
                  className="inline-form"
                  onSubmit={(e) => {
                    e.preventDefault();
                    void save(s.key, value);
                  }}
                >
                  <input
                    type="password"
                    aria-label={`New value for ${s.key}`}
                    autoComplete="off"
                    value={value}
                    required
                    onChange={(e) => setValue(e.target.value)}
                  />
                  <button type="submit" className="btn btn-small btn-primary" disabled={busy}>
                    Save
                  </button>
                  <button type="button" className="btn btn-small" onClick={() => setReplacing(null)}>
                    Cancel
                  </button>
                </form>
              ) : (
                <span className="row-actions">
                  <button
                    type="button"
                    className="btn btn-small"
                    onClick={() => {
                      setValue('');
                      setReplacing(s.key);
                    }}
                  >
                    Replace<span className="visually-hidden"> {s.key}</span>
                  </button>
                  <button type="button" className="btn btn-small btn-danger" onClick={() => remove(s.key)}>
                    Remove<span className="visually-hidden"> {s.key}</span>
                  </button>
                </span>
              )}
            </li>
          ))}
        </ul>
      ) : (
        <p className="muted">{list.loading ? 'Loading…' : 'No secrets yet.'}</p>
      )}
      {replacing === null && (
        <form
          className="kv-row secret-add"
          onSubmit={(e) => {
            e.preventDefault();
            void save(key, value);
          }}
        >
          <input
            aria-label="Secret name"
            placeholder="NAME"
            className="mono"
            value={key}
            required
            onChange={(e) => setKey(e.target.value)}
          />
          <input
            type="password"
            aria-label="Secret value"
            placeholder="value"
            autoComplete="off"
            value={value}
            required
            onChange={(e) => setValue(e.target.value)}
          />
          <button type="submit" className="btn btn-small" disabled={busy}>
            Add secret
          </button>
        </form>
      )}
      <FieldMessages messages={Object.values(errors).flat()} />
      {list.error ? <p className="field-error">{errorMessage(list.error)}</p> : null}
    </Section>
  );
}
