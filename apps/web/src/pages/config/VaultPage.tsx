// One vault: rename, its write-only secrets, delete.
import './config.css';
import { type FormEvent, useEffect, useState } from 'react';
import { type ApiData, api } from '../../api/client';
import { navigate, useParams } from '../../app/router';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { Field } from '../../ui/Field';
import { ConfigNav } from './ConfigNav';
import { errorsUnder, fieldErrorsOf, SecretsPanel } from './editors';

type Vault = ApiData<'/api/vaults/{id}'>;

export default function VaultPage() {
  const { id = '' } = useParams();
  const [vault, setVault] = useState<Vault | null>(null);
  const [name, setName] = useState('');
  const [loadError, setLoadError] = useState<unknown>(null);
  const [error, setError] = useState<unknown>(null);
  const [saved, setSaved] = useState(false);
  const errors = fieldErrorsOf(error);
  useEffect(() => {
    const controller = new AbortController();
    api
      .get('/api/vaults/{id}', { path: { id }, signal: controller.signal })
      .then((v) => {
        setVault(v);
        setName(v.name);
      })
      .catch((err: unknown) => {
        if (!controller.signal.aborted) setLoadError(err);
      });
    return () => controller.abort();
  }, [id]);
  if (loadError) return <ErrorNotice error={loadError} />;
  if (!vault) return <p className="loading">Loading…</p>;

  const save = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    try {
      const updated = await api.put('/api/vaults/{id}', {
        path: { id },
        body: { name: name.trim(), metadata: vault.metadata },
      });
      setVault(updated);
      setSaved(true);
    } catch (err) {
      setError(err);
    }
  };
  const remove = async () => {
    if (
      !window.confirm(
        `Delete the vault ${vault.name}? Its secrets are deleted and it leaves every agent's allowlist.`,
      )
    )
      return;
    try {
      await api.delete('/api/vaults/{id}', { path: { id } });
      navigate('/vaults');
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section className="page">
      <ConfigNav />
      <div className="page-header">
        <h1>Vault {vault.name}</h1>
        <button type="button" className="btn btn-danger" onClick={remove}>
          Delete vault
        </button>
      </div>
      <ErrorNotice error={Object.keys(errors).length ? null : error} />
      <form className="form-actions" onSubmit={save}>
        <Field
          label="Name"
          value={name}
          required
          onChange={(e) => {
            setSaved(false);
            setName(e.target.value);
          }}
          errors={errorsUnder(errors, 'name')}
        />
        <button type="submit" className="btn">
          Rename
        </button>
        {saved && (
          <span role="status" className="muted">
            Saved.
          </span>
        )}
      </form>
      <div className="section-gap">
        <SecretsPanel owner="vaults" id={id} />
      </div>
    </section>
  );
}
