import { type FormEvent, useState } from 'react';
import { api } from '../../api/client';
import { Link, useLocation } from '../../app/router';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { Field } from '../../ui/Field';

/** After registration (mail on) or a sign-in refused for an unconfirmed address. */
export default function VerifyPendingPage() {
  const { search } = useLocation();
  const [email, setEmail] = useState(search.get('email') ?? '');
  const [sent, setSent] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);

  const resend = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const res = await api.post('/api/auth/resend-verification', { body: { email } });
      setSent(res.message);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section className="auth-card">
      <h1>Confirm your email address</h1>
      {search.get('registered') ? (
        <p>
          Your account is created. We sent a confirmation link to the address below: open it, then sign in.
        </p>
      ) : (
        <p>This address is not confirmed yet. Open the link we emailed you, or have a new one sent.</p>
      )}
      {sent && (
        <div className="notice notice-ok" role="status">
          {sent}
        </div>
      )}
      <ErrorNotice error={error} />
      <form onSubmit={resend} className="stack">
        <Field
          label="Email"
          type="email"
          name="email"
          autoComplete="email"
          required
          value={email}
          onChange={(e) => setEmail(e.target.value)}
        />
        <button type="submit" className="btn btn-block" disabled={busy}>
          {busy ? 'Sending…' : 'Send a new link'}
        </button>
      </form>
      <p className="auth-links">
        <Link href="/sign-in">Back to sign in</Link>
      </p>
    </section>
  );
}
