// Admin: the backend sandboxes no row knows, as the sandbox reaper's last full listing found
// them (hourly at :07). The reaper reports these and never destroys them: they may belong to
// another deployment sharing the backend token, or be left by a database restored from backup.
import '../config/config.css';
import { api } from '../../api/client';
import { useApi } from '../../api/use-api';
import { Link } from '../../app/router';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { relativeTime } from '../../ui/time';

export default function AdminSandboxesPage() {
  const report = useApi((signal) => api.get('/api/admin/untracked-sandboxes', { signal }), []);
  const rows = report.data?.data ?? [];
  return (
    <section className="page">
      <div className="page-header">
        <h1>Untracked sandboxes</h1>
        <Link href="/admin/users">Users</Link>
      </div>
      <p className="muted">
        Backend sandboxes that no conversation or pending destroy knows, found by the sandbox reaper's last
        full listing. They are reported, never destroyed: check what they are, then destroy them on the
        backend if they are not needed (docs/upkeep.md).
      </p>
      <ErrorNotice error={report.error} />
      <div className="table-wrap">
        <table className="data-table data-table-stack" aria-busy={report.loading}>
          <thead>
            <tr>
              <th scope="col">Sandbox</th>
              <th scope="col">First seen</th>
              <th scope="col">Last seen</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((s) => (
              <tr key={s.name}>
                <td>
                  <code>{s.name}</code>
                </td>
                <td>{relativeTime(s.first_seen_at)}</td>
                <td>{relativeTime(s.last_seen_at)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {rows.length === 0 && !report.loading && !report.error && (
        <p className="muted">None: every backend sandbox is known.</p>
      )}
    </section>
  );
}
