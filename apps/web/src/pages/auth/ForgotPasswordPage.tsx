import { type FormEvent, useState } from 'react';
import { api } from '../../api/client';
import { Link } from '../../app/router';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { Field } from '../../ui/Field';

export default function ForgotPasswordPage() {
  const [email, setEmail] = useState('');
  const [sent, setSent] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      setSent((await api.post('/api/auth/password-reset', { body: { email } })).message);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section className="auth-card">
      <h1>Forgot your password?</h1>
      <p>Enter your account's email address and we will send you a link to choose a new password.</p>
      {sent && (
        <div className="notice notice-ok" role="status">
          {sent}
        </div>
      )}
      <ErrorNotice error={error} />
      <form onSubmit={submit} className="stack">
        <Field
          label="Email"
          type="email"
          name="email"
          autoComplete="email"
          required
          value={email}
          onChange={(e) => setEmail(e.target.value)}
        />
        <button type="submit" className="btn btn-primary btn-block" disabled={busy}>
          {busy ? 'Sending…' : 'Send reset link'}
        </button>
      </form>
      <p className="auth-links">
        <Link href="/sign-in">Back to sign in</Link>
      </p>
    </section>
  );
}
