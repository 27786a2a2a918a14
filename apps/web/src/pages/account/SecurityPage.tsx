// Password change, email change and signing out the other sessions.
import { type FormEvent, useState } from 'react';
import { api } from '../../api/client';
import { useSession } from '../../api/session';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { Field } from '../../ui/Field';
import { counted } from '../../ui/plural';
import { errorsUnder, fieldErrorsOf, Section } from '../config/editors';
import { AccountNav } from './AccountNav';

export default function SecurityPage() {
  const { me } = useSession();
  return (
    <section className="page">
      <AccountNav />
      <div className="page-header">
        <h1>Security</h1>
      </div>
      <div className="stack narrow">
        <p className="muted">
          Signed in as <strong>{me?.email}</strong>.
        </p>
        {me?.has_password ? (
          <>
            <PasswordForm />
            <EmailForm />
          </>
        ) : (
          <p className="muted">
            This account signs in through its identity provider and has no password; set one with “Forgot
            password”.
          </p>
        )}
        <OtherSessions />
      </div>
    </section>
  );
}

function PasswordForm() {
  const [current, setCurrent] = useState('');
  const [next, setNext] = useState('');
  const [revokeKeys, setRevokeKeys] = useState(false);
  const [done, setDone] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const errors = fieldErrorsOf(error);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    setDone(null);
    try {
      const res = await api.post('/api/auth/password', {
        body: { current_password: current, new_password: next, revoke_api_keys: revokeKeys },
      });
      setDone(
        `${res.message} ${counted(res.sessions_ended, 'other session')} ended${
          res.api_keys_revoked ? `, ${counted(res.api_keys_revoked, 'API key')} revoked` : ''
        }.`,
      );
      setCurrent('');
      setNext('');
    } catch (err) {
      setError(err);
    }
  };
  return (
    <Section title="Change password">
      <form className="stack" onSubmit={submit}>
        <ErrorNotice error={Object.keys(errors).length ? null : error} />
        <Field
          label="Current password"
          type="password"
          autoComplete="current-password"
          required
          value={current}
          onChange={(e) => setCurrent(e.target.value)}
          errors={errorsUnder(errors, 'current_password')}
        />
        <Field
          label="New password"
          type="password"
          autoComplete="new-password"
          required
          minLength={8}
          value={next}
          onChange={(e) => setNext(e.target.value)}
          errors={errorsUnder(errors, 'new_password')}
        />
        <label className="check">
          <input type="checkbox" checked={revokeKeys} onChange={(e) => setRevokeKeys(e.target.checked)} />
          Also revoke every API key
        </label>
        <div className="form-actions">
          <button type="submit" className="btn btn-primary">
            Change password
          </button>
        </div>
        {done && (
          <p role="status" className="notice notice-ok">
            {done}
          </p>
        )}
      </form>
    </Section>
  );
}

function EmailForm() {
  const [password, setPassword] = useState('');
  const [email, setEmail] = useState('');
  const [done, setDone] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const { refresh } = useSession();
  const errors = fieldErrorsOf(error);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    setDone(null);
    try {
      const res = await api.post('/api/auth/email', {
        body: { current_password: password, new_email: email },
      });
      setDone(
        res.status === 'changed'
          ? 'Email address changed.'
          : `A confirmation link was sent to ${email}. The change takes effect when you open it.`,
      );
      setPassword('');
      if (res.status === 'changed') await refresh();
    } catch (err) {
      setError(err);
    }
  };
  return (
    <Section title="Change email address">
      <form className="stack" onSubmit={submit}>
        <ErrorNotice error={Object.keys(errors).length ? null : error} />
        <Field
          label="New email address"
          type="email"
          autoComplete="email"
          required
          value={email}
          onChange={(e) => setEmail(e.target.value)}
          errors={errorsUnder(errors, 'new_email')}
        />
        <Field
          label="Current password"
          type="password"
          autoComplete="current-password"
          required
          value={password}
          onChange={(e) => setPassword(e.target.value)}
          errors={errorsUnder(errors, 'current_password')}
        />
        <div className="form-actions">
          <button type="submit" className="btn btn-primary">
            Change email
          </button>
        </div>
        {done && (
          <p role="status" className="notice notice-ok">
            {done}
          </p>
        )}
      </form>
    </Section>
  );
}

function OtherSessions() {
  const [done, setDone] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const run = async () => {
    setError(null);
    try {
      const res = await api.post('/api/auth/sessions/end-others');
      setDone(`${counted(res.sessions_ended, 'other session')} signed out.`);
    } catch (err) {
      setError(err);
    }
  };
  return (
    <Section
      title="Sessions"
      hint="Signs out every other browser where this account is signed in; this one stays."
    >
      <ErrorNotice error={error} />
      <div className="form-actions">
        <button type="button" className="btn" onClick={run}>
          Sign out other sessions
        </button>
        <span role="status" className="muted">
          {done ?? ''}
        </span>
      </div>
    </Section>
  );
}
