// The account's agents: a runtime and model with their instructions, skills and tools.
import './config.css';
import { api } from '../../api/client';
import { useApi } from '../../api/use-api';
import { Link } from '../../app/router';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { counted } from '../../ui/plural';
import { ConfigNav } from './ConfigNav';

export default function AgentsPage() {
  const list = useApi((signal) => api.get('/api/agents', { signal }), []);
  return (
    <section className="page">
      <ConfigNav />
      <div className="page-header">
        <h1>Agents</h1>
        <Link href="/agents/new" className="btn btn-primary">
          New agent
        </Link>
      </div>
      <ErrorNotice error={list.error} />
      {list.data?.data.length === 0 && (
        <p className="muted">
          No agents yet. An agent is what a conversation runs: a runtime, a model and its setup.
        </p>
      )}
      <ul className="card-list" aria-label="Agents">
        {list.data?.data.map((a) => (
          <li key={a.id} className="card">
            <h2>
              <Link href={`/agents/${a.id}`}>{a.name}</Link>
            </h2>
            <span className="muted">
              {a.runtime} · <code>{a.model}</code>
            </span>
            {a.description && <span>{a.description}</span>}
            <span className="muted">
              {counted(a.skills.length, 'skill')} · {counted(Object.keys(a.mcp_servers).length, 'MCP server')}{' '}
              · {counted(a.vault_ids.length, 'vault')}
            </span>
          </li>
        ))}
      </ul>
    </section>
  );
}
