// Admin: billing at a glance (billing on only; with billing off there is no such page, and the
// server has no such route). The monthly revenue figure is active subscriptions × the
// configured monthly price (BILLING_PRICE_MONTHLY_CENTS; "not set" without it); accounts per
// subscription status; and the processor events whose apply failed and that no redelivery has
// applied yet (docs/billing.md "Admin").
import '../config/config.css';
import { Fragment } from 'react';
import { api } from '../../api/client';
import { useSite } from '../../api/site';
import { useApi } from '../../api/use-api';
import { Link } from '../../app/router';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { relativeTime } from '../../ui/time';
import NotFoundPage from '../NotFoundPage';

const STATUSES = ['trialing', 'active', 'past_due', 'canceled', 'comped'] as const;

function money(cents: number): string {
  return new Intl.NumberFormat(undefined, { style: 'currency', currency: 'USD' }).format(cents / 100);
}

export default function AdminBillingPage() {
  const site = useSite();
  if (site.data && !site.data.billing.enabled) return <NotFoundPage />;
  if (!site.data) return <ErrorNotice error={site.error} />;
  return <BillingOverview />;
}

function BillingOverview() {
  const summary = useApi((signal) => api.get('/api/admin/billing', { signal }), []);
  const failures = useApi((signal) => api.get('/api/admin/billing/failures', { signal }), []);
  const s = summary.data;
  const rows = failures.data?.data ?? [];
  return (
    <section className="page">
      <div className="page-header">
        <h1>Billing</h1>
        <Link href="/admin/users">Users</Link>
      </div>
      <ErrorNotice error={summary.error ?? failures.error} />
      {s && (
        <div className="section-gap-bottom">
          <dl className="meta-grid" aria-label="Billing summary">
            <dt>Monthly revenue</dt>
            <dd>
              {s.revenue_monthly_cents === null
                ? 'not set (BILLING_PRICE_MONTHLY_CENTS is unset)'
                : `${money(s.revenue_monthly_cents)} (${s.active_subscriptions} active × ${money(s.price_monthly_cents ?? 0)})`}
            </dd>
            {STATUSES.map((status) => (
              <Fragment key={status}>
                <dt>{status.replace('_', ' ')}</dt>
                <dd>{s.accounts_by_status[status]}</dd>
              </Fragment>
            ))}
          </dl>
        </div>
      )}
      <h2 className="h3 section-gap">Webhook failures</h2>
      <p className="muted">
        Events from the payment processor whose apply failed. The processor redelivers each until it is
        applied; a row leaves this list when a redelivery succeeds.
      </p>
      {failures.data && rows.length === 0 && <p>No failed webhook events.</p>}
      {rows.length > 0 && (
        <div className="table-wrap">
          <table className="data-table data-table-stack" aria-busy={failures.loading}>
            <thead>
              <tr>
                <th scope="col">Event</th>
                <th scope="col">Type</th>
                <th scope="col">Attempts</th>
                <th scope="col">Last received</th>
                <th scope="col">Error</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((f) => (
                <tr key={f.id}>
                  <td>
                    <code>{f.id}</code>
                  </td>
                  <td>{f.type}</td>
                  <td>{f.attempts}</td>
                  <td>{relativeTime(f.received_at)}</td>
                  <td className="mono">{f.error ?? '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
