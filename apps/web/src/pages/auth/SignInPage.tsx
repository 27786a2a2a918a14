import { type FormEvent, useState } from 'react';
import { ApiError, api } from '../../api/client';
import { useSession } from '../../api/session';
import { Link, navigate, useLocation } from '../../app/router';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { Field } from '../../ui/Field';
import { Flash } from '../../ui/Flash';
import { PROVIDER_LABELS, useProviders } from './providers';

/** Only a path on this site is a place to return to after signing in. */
export function safeNext(next: string | null): string {
  return next?.startsWith('/') && !next.startsWith('//') && !next.startsWith('/\\') ? next : '/';
}

export default function SignInPage() {
  const { search } = useLocation();
  const { refresh } = useSession();
  const providers = useProviders();
  // The sign-up link once the server said registration is open (never one that then vanishes);
  // when it could not be asked, the sign-up page says what holds.
  const registrationOpen = providers.data ? providers.data.registration_enabled : Boolean(providers.error);
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await api.post('/api/auth/login', { body: { email, password } });
      await refresh();
      navigate(safeNext(search.get('next')), { replace: true });
    } catch (err) {
      if (err instanceof ApiError && err.code === 'email_not_verified') {
        navigate(`/verify-email?email=${encodeURIComponent(email)}`);
        return;
      }
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <section className="auth-card">
      <h1>Sign in to Paddock</h1>
      <Flash />
      <ErrorNotice error={error} />
      {providers.data && providers.data.oauth.length > 0 && (
        <div className="oauth">
          {providers.data.oauth.map((p) => (
            <a key={p.id} className="btn btn-block" href={p.url}>
              Continue with {PROVIDER_LABELS[p.id] ?? p.id}
            </a>
          ))}
          <p className="divider">
            <span>or with your email</span>
          </p>
        </div>
      )}
      <form onSubmit={submit} className="stack">
        <Field
          label="Email"
          type="email"
          name="email"
          autoComplete="username"
          required
          value={email}
          onChange={(e) => setEmail(e.target.value)}
        />
        <Field
          label="Password"
          type="password"
          name="password"
          autoComplete="current-password"
          required
          value={password}
          onChange={(e) => setPassword(e.target.value)}
        />
        <button type="submit" className="btn btn-primary btn-block" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
      <p className="auth-links" aria-busy={providers.loading}>
        <Link href="/forgot-password">Forgot your password?</Link>
        {registrationOpen && <Link href="/sign-up">Create an account</Link>}
      </p>
    </section>
  );
}
