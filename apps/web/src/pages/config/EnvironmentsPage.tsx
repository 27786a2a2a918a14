// The account's environments: what a conversation's sandbox is built from.
import './config.css';
import { api } from '../../api/client';
import { useApi } from '../../api/use-api';
import { Link } from '../../app/router';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { counted } from '../../ui/plural';
import { relativeTime } from '../../ui/time';
import { ConfigNav } from './ConfigNav';

export default function EnvironmentsPage() {
  const list = useApi((signal) => api.get('/api/environments', { signal }), []);
  return (
    <section className="page">
      <ConfigNav />
      <div className="page-header">
        <h1>Environments</h1>
        <Link href="/environments/new" className="btn btn-primary">
          New environment
        </Link>
      </div>
      <ErrorNotice error={list.error} />
      {list.data?.data.length === 0 && (
        <p className="muted">
          No environments yet. An environment says what a sandbox starts with: variables, packages,
          repositories, a setup script, network rules and secrets.
        </p>
      )}
      <ul className="card-list" aria-label="Environments">
        {list.data?.data.map((e) => (
          <li key={e.id} className="card">
            <h2>
              <Link href={`/environments/${e.id}`}>{e.name}</Link>
            </h2>
            <span className="muted">
              {counted(e.repos.length, 'repo')} · {counted(e.secret_count, 'secret')} ·{' '}
              {counted(e.agent_count, 'agent')}
            </span>
            <span className="muted">
              network {e.networking_type} · {e.checkpoint_id ? 'checkpoint ready' : 'no checkpoint'} · updated{' '}
              {relativeTime(e.updated_at)}
            </span>
          </li>
        ))}
      </ul>
    </section>
  );
}
