// Deleting the account (DELETE /api/account): the email typed again and, for a password
// account, the password. Irreversible, so the form says what goes before it is sent.
import { type FormEvent, useState } from 'react';
import { api } from '../../api/client';
import { useSession } from '../../api/session';
import { navigate } from '../../app/router';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { Field } from '../../ui/Field';
import { errorsUnder, fieldErrorsOf, Section } from '../config/editors';

export function DeleteAccount() {
  const { me, refresh } = useSession();
  const [email, setEmail] = useState('');
  const [password, setPassword] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const errors = fieldErrorsOf(error);
  if (!me) return null;
  const matches = email.trim().toLowerCase() === me.email.toLowerCase();

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setError(null);
    setBusy(true);
    try {
      await api.delete('/api/account', {
        body: { confirm_email: email, ...(me.has_password ? { current_password: password } : {}) },
      });
      // The session went with the account: the console is signed out from here on.
      await refresh().catch(() => null);
      navigate('/sign-in?flash=account_deleted', { replace: true });
    } catch (err) {
      setError(err);
      setBusy(false);
    }
  };

  return (
    <Section
      title="Delete account"
      hint="Deletes this account and everything in it, at once and for good: every conversation and its sandbox, environments, vaults and their secrets, agents, API keys, sessions and inference credentials. It cannot be undone."
    >
      <form className="stack" onSubmit={submit}>
        <ErrorNotice error={Object.keys(errors).length ? null : error} />
        <Field
          label={
            <>
              Type <strong>{me.email}</strong> to confirm
            </>
          }
          type="email"
          autoComplete="off"
          required
          value={email}
          onChange={(e) => setEmail(e.target.value)}
          errors={errorsUnder(errors, 'confirm_email')}
        />
        {me.has_password && (
          <Field
            label="Current password"
            type="password"
            autoComplete="current-password"
            required
            value={password}
            onChange={(e) => setPassword(e.target.value)}
            errors={errorsUnder(errors, 'current_password')}
          />
        )}
        <div className="form-actions">
          <button type="submit" className="btn btn-danger" disabled={!matches || busy}>
            {busy ? 'Deleting…' : 'Delete my account'}
          </button>
        </div>
      </form>
    </Section>
  );
}
