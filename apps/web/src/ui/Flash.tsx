// One-line notices the server's browser routes ask for with `?flash=<code>` (the email
// links of /auth/verify and /auth/confirm-email, OAuth sign-in) and the console's own
// redirects (signed out, password changed). Unknown codes show nothing.
import { useLocation } from '../app/router';

const MESSAGES: Record<string, { text: string; tone: 'ok' | 'error' }> = {
  email_verified: { text: 'Email address confirmed. You can sign in now.', tone: 'ok' },
  email_already_verified: { text: 'This email address is already confirmed. You can sign in.', tone: 'ok' },
  verification_link_invalid: {
    text: 'That confirmation link is invalid or has expired. Sign in to have a new one sent.',
    tone: 'error',
  },
  email_changed: { text: 'Your email address has been changed.', tone: 'ok' },
  email_already_changed: { text: 'This email change was already confirmed.', tone: 'ok' },
  email_change_link_invalid: {
    text: 'That email-change link is invalid or has expired. Request the change again from your account.',
    tone: 'error',
  },
  oauth_failed: { text: 'Sign-in with the identity provider did not complete. Try again.', tone: 'error' },
  registration_closed: { text: 'Registration is closed on this instance.', tone: 'error' },
  forbidden: {
    text: 'That sign-in was refused: the account has no verified email, or its domain may not register here.',
    tone: 'error',
  },
  account_unavailable: { text: 'This account cannot sign in. Contact support.', tone: 'error' },
  conflict: { text: 'That account was just created elsewhere. Try signing in again.', tone: 'error' },
  signed_out: { text: 'You are signed out.', tone: 'ok' },
  account_deleted: { text: 'Your account and everything in it have been deleted.', tone: 'ok' },
  password_reset: { text: 'Password changed. Sign in with your new password.', tone: 'ok' },
  registered: { text: 'Account created. You can sign in now.', tone: 'ok' },
};

export function Flash() {
  const { search } = useLocation();
  const code = search.get('flash');
  const message = code ? MESSAGES[code] : undefined;
  if (!message) return null;
  return (
    <div className={`notice ${message.tone === 'ok' ? 'notice-ok' : 'notice-error'}`} role="status">
      {message.text}
    </div>
  );
}
