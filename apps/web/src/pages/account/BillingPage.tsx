// /account/billing (BILLING_ENABLED only; the server answers 404 otherwise): the subscription as
// this instance knows it (local state, so it renders while the payment processor is down),
// the trial and period dates, cancel at period end, and the checkout and portal buttons, which
// send the browser to the processor's hosted pages. A processor outage is shown as an error
// on the button that met it.
import { useState } from 'react';
import { type ApiData, api } from '../../api/client';
import { useApi } from '../../api/use-api';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { formatPrice } from '../home/HomePage';
import { AccountNav } from './AccountNav';

type Billing = ApiData<'/api/billing'>;

const STATUS_TEXT: Record<string, string> = {
  trialing: 'Trial',
  active: 'Active',
  past_due: 'Payment past due',
  canceled: 'Canceled',
  comped: 'Complimentary',
};

const date = (iso: string | null) =>
  iso ? new Date(iso).toLocaleDateString(undefined, { dateStyle: 'long' }) : null;

function summary(b: Billing): string {
  if (b.status === null || (b.status === 'trialing' && b.legacy && !b.trial_ends_at))
    return 'Your account predates billing on this instance: you can keep working until a trial is started for it.';
  switch (b.status) {
    case 'trialing':
      return b.trial_ends_at && new Date(b.trial_ends_at).getTime() <= Date.now()
        ? 'Your trial has ended. Subscribe to start or continue conversations; past conversations stay readable.'
        : 'You are on a trial. Subscribe before it ends to keep starting conversations.';
    case 'active':
      return b.cancel_at_period_end
        ? 'Your subscription is active and ends at the end of the current period.'
        : 'Your subscription is active.';
    case 'past_due':
      return 'The last payment failed. Update your payment method in the billing portal; until then you can read past conversations but not start or continue them.';
    case 'canceled':
      return 'Your subscription is canceled. Subscribe again to start or continue conversations; past conversations stay readable.';
    case 'comped':
      return 'This account is complimentary: no subscription is needed.';
    default:
      return '';
  }
}

export default function BillingPage() {
  const q = useApi((signal) => api.get('/api/billing', { signal }), []);
  const outcome = new URLSearchParams(window.location.search).get('checkout');
  return (
    <section className="page">
      <AccountNav billing />
      <div className="page-header">
        <h1>Billing</h1>
      </div>
      <div className="stack narrow">
        {outcome === 'success' && (
          <p role="status" className="notice notice-ok">
            Thank you: the payment processor confirmed your checkout. The status below changes as soon as it
            tells this instance.
          </p>
        )}
        {outcome === 'canceled' && (
          <p role="status" className="notice notice-info">
            Checkout was canceled; nothing was charged.
          </p>
        )}
        <ErrorNotice error={q.error} />
        {q.data && <BillingDetails billing={q.data} onChange={q.set} />}
      </div>
    </section>
  );
}

function BillingDetails({ billing: b, onChange }: { billing: Billing; onChange(b: Billing): void }) {
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const go = async (which: 'checkout' | 'portal') => {
    setBusy(which);
    setError(null);
    try {
      const res = await api.post(which === 'checkout' ? '/api/billing/checkout' : '/api/billing/portal', {});
      window.location.assign(res.url);
    } catch (err) {
      setError(err);
      setBusy(null);
    }
  };
  const setCancel = async (cancel: boolean) => {
    setBusy('cancel');
    setError(null);
    try {
      onChange(
        await api.post('/api/billing/cancel-at-period-end', { body: { cancel_at_period_end: cancel } }),
      );
    } catch (err) {
      setError(err);
    } finally {
      setBusy(null);
    }
  };
  const live = b.has_subscription && b.status !== 'canceled' && b.status !== 'comped';
  return (
    <>
      <p>{summary(b)}</p>
      <dl className="meta-grid">
        <dt>Status</dt>
        <dd>{b.status ? STATUS_TEXT[b.status] : 'No trial started (account predates billing)'}</dd>
        {b.status === 'trialing' && b.trial_ends_at && (
          <>
            <dt>Trial ends</dt>
            <dd>{date(b.trial_ends_at)}</dd>
          </>
        )}
        {b.current_period_end && (
          <>
            <dt>{b.cancel_at_period_end ? 'Ends on' : 'Current period ends'}</dt>
            <dd>{date(b.current_period_end)}</dd>
          </>
        )}
        {b.has_subscription && (
          <>
            <dt>Cancel at period end</dt>
            <dd>{b.cancel_at_period_end ? 'Yes' : 'No'}</dd>
          </>
        )}
        {b.price_monthly_cents !== null && b.status !== 'comped' && (
          <>
            <dt>Price</dt>
            <dd>{formatPrice(b.price_monthly_cents)} per month</dd>
          </>
        )}
      </dl>
      <ErrorNotice error={error} />
      <div className="form-actions">
        {b.checkout_available && (
          <button
            type="button"
            className="btn btn-primary"
            disabled={busy !== null}
            onClick={() => go('checkout')}
          >
            {busy === 'checkout' ? 'Opening checkout…' : 'Subscribe'}
          </button>
        )}
        {b.portal_available && (
          <button type="button" className="btn" disabled={busy !== null} onClick={() => go('portal')}>
            {busy === 'portal' ? 'Opening the billing portal…' : 'Manage payment and invoices'}
          </button>
        )}
        {live && (
          <button
            type="button"
            className="btn"
            disabled={busy !== null}
            onClick={() => setCancel(!b.cancel_at_period_end)}
          >
            {b.cancel_at_period_end ? 'Keep my subscription' : 'Cancel at period end'}
          </button>
        )}
      </div>
    </>
  );
}
