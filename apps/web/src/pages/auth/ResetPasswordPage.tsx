import { type FormEvent, useState } from 'react';
import { ApiError, api } from '../../api/client';
import { Link, navigate, useLocation } from '../../app/router';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { Field } from '../../ui/Field';

/** The link of the password-reset email: /reset-password?token=… (single use, one hour). */
export default function ResetPasswordPage() {
  const { search } = useLocation();
  const token = search.get('token') ?? '';
  const [password, setPassword] = useState('');
  const [revokeKeys, setRevokeKeys] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const fieldErrors = error instanceof ApiError ? error.body.errors : undefined;

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api.post('/api/auth/password-reset/confirm', {
        body: { token, password, revoke_api_keys: revokeKeys },
      });
      navigate('/sign-in?flash=password_reset', { replace: true });
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  if (!token) {
    return (
      <section className="auth-card">
        <h1>Reset link incomplete</h1>
        <p>This page needs the link from the password-reset email. Request a new one if it expired.</p>
        <p>
          <Link href="/forgot-password">Request a new link</Link>
        </p>
      </section>
    );
  }
  return (
    <section className="auth-card">
      <h1>Choose a new password</h1>
      <ErrorNotice error={fieldErrors?.['password'] ? null : error} />
      <form onSubmit={submit} className="stack">
        <Field
          label="New password"
          type="password"
          name="password"
          autoComplete="new-password"
          required
          minLength={8}
          hint="At least 8 characters. Every session of the account is signed out."
          value={password}
          onChange={(e) => setPassword(e.target.value)}
          errors={fieldErrors?.['password']}
        />
        <label className="check">
          <input type="checkbox" checked={revokeKeys} onChange={(e) => setRevokeKeys(e.target.checked)} />{' '}
          Also revoke every API key of the account
        </label>
        <button type="submit" className="btn btn-primary btn-block" disabled={busy}>
          {busy ? 'Saving…' : 'Set new password'}
        </button>
      </form>
      <p className="auth-links">
        <Link href="/forgot-password">Request a new link</Link>
      </p>
    </section>
  );
}
