import { type FormEvent, useState } from 'react';
import { ApiError, api } from '../../api/client';
import { useSession } from '../../api/session';
import { Link, navigate } from '../../app/router';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { Field } from '../../ui/Field';
import { PROVIDER_LABELS, useProviders } from './providers';

export default function SignUpPage() {
  const { refresh } = useSession();
  const providers = useProviders();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const fieldErrors = error instanceof ApiError ? error.body.errors : undefined;

  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const created = await api.post('/api/auth/register', { body: { email, password } });
      if (created.can_sign_in_now) {
        // No mail on this instance: the account is verified already, so sign straight in.
        await api.post('/api/auth/login', { body: { email, password } });
        await refresh();
        navigate('/', { replace: true });
      } else {
        navigate(`/verify-email?email=${encodeURIComponent(email)}&registered=1`, { replace: true });
      }
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  if (providers.data && !providers.data.registration_enabled) {
    return (
      <section className="auth-card">
        <h1>Registration is closed</h1>
        <p>This Paddock instance does not accept new accounts. Ask its operator for access.</p>
        <p>
          <Link href="/sign-in">Sign in with an existing account</Link>
        </p>
      </section>
    );
  }

  return (
    <section className="auth-card">
      <h1>Create your Paddock account</h1>
      {/* Field errors show beside their fields; the rest (registration closed) here. */}
      <ErrorNotice error={fieldErrors ? null : error} />
      {providers.data && providers.data.oauth.length > 0 && (
        <div className="oauth">
          {providers.data.oauth.map((p) => (
            <a key={p.id} className="btn btn-block" href={p.url}>
              Sign up with {PROVIDER_LABELS[p.id] ?? p.id}
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
          autoComplete="email"
          required
          value={email}
          onChange={(e) => setEmail(e.target.value)}
          errors={fieldErrors?.['email']}
        />
        <Field
          label="Password"
          type="password"
          name="password"
          autoComplete="new-password"
          required
          minLength={8}
          hint="At least 8 characters; a phrase of several words is easy to remember and hard to guess."
          value={password}
          onChange={(e) => setPassword(e.target.value)}
          errors={fieldErrors?.['password']}
        />
        <button type="submit" className="btn btn-primary btn-block" disabled={busy}>
          {busy ? 'Creating account…' : 'Create account'}
        </button>
      </form>
      <p className="auth-links">
        <Link href="/sign-in">Already have an account? Sign in</Link>
      </p>
    </section>
  );
}
