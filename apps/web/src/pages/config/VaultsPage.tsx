// The account's vaults: named sets of secrets an agent's conversations may be given.
import './config.css';
import { type FormEvent, useState } from 'react';
import { api } from '../../api/client';
import { useApi } from '../../api/use-api';
import { Link, navigate } from '../../app/router';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { Field } from '../../ui/Field';
import { counted } from '../../ui/plural';
import { ConfigNav } from './ConfigNav';
import { errorsUnder, fieldErrorsOf } from './editors';

export default function VaultsPage() {
  const list = useApi((signal) => api.get('/api/vaults', { signal }), []);
  const [name, setName] = useState('');
  const [error, setError] = useState<unknown>(null);
  const errors = fieldErrorsOf(error);
  const create = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    try {
      const vault = await api.post('/api/vaults', { body: { name: name.trim() } });
      navigate(`/vaults/${vault.id}`);
    } catch (err) {
      setError(err);
    }
  };
  return (
    <section className="page">
      <ConfigNav />
      <div className="page-header">
        <h1>Vaults</h1>
      </div>
      <ErrorNotice error={list.error ?? (Object.keys(errors).length ? null : error)} />
      <form className="form-actions section-gap-bottom" onSubmit={create}>
        <Field
          label="New vault name"
          value={name}
          required
          onChange={(e) => setName(e.target.value)}
          errors={errorsUnder(errors, 'name')}
        />
        <button type="submit" className="btn btn-primary">
          Create vault
        </button>
      </form>
      {list.data?.data.length === 0 && (
        <p className="muted">
          No vaults yet. A vault holds secrets that an agent's allowlist can hand to a conversation.
        </p>
      )}
      <ul className="card-list" aria-label="Vaults">
        {list.data?.data.map((v) => (
          <li key={v.id} className="card">
            <h2>
              <Link href={`/vaults/${v.id}`}>{v.name}</Link>
            </h2>
            <span className="muted">
              {counted(v.secret_count, 'secret')} · allowed for {counted(v.agent_count, 'agent')}
            </span>
          </li>
        ))}
      </ul>
    </section>
  );
}
