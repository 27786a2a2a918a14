// Notification templates: plain text plus simple HTML, links built from PUBLIC_URL.
// Every value interpolated into HTML is escaped.

export type MailTemplate =
  | { kind: 'verification'; token: string }
  | { kind: 'welcome' }
  | { kind: 'password_reset'; token: string }
  | { kind: 'email_change_confirm'; token: string; newEmail: string }
  | { kind: 'email_change_notice'; newEmail: string }
  | { kind: 'email_taken_notice' }
  | { kind: 'password_changed'; via: 'reset' | 'change' | 'admin'; keys: MailApiKey[] }
  | { kind: 'suspended' }
  | { kind: 'unsuspended' }
  | { kind: 'export_ready'; sizeBytes: number; expiresAt: Date }
  | { kind: 'account_deleted' };

export interface MailApiKey {
  name: string;
  prefix: string;
  createdAt: Date;
  lastUsedAt: Date | null;
}

export interface RenderContext {
  publicUrl: URL;
  supportEmail?: string | undefined;
}

export interface RenderedMail {
  subject: string;
  text: string;
  html: string;
}

function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** 1536 → "1.5 KiB": sizes in mails, in binary units as the CLI prints them. */
export function humanBytes(bytes: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${bytes} bytes` : `${value.toFixed(1)} ${units[unit]}`;
}

export function link(publicUrl: URL, path: string, token?: string): string {
  const u = new URL(path, publicUrl.origin);
  if (token) u.searchParams.set('token', token);
  return u.toString();
}

/** A mail's content before layout: other domains' notifications (billing) render through layoutMail. */
export interface MailBody {
  subject: string;
  paragraphs: string[];
  action?: { label: string; url: string };
}

type Body = MailBody;

function body(t: MailTemplate, ctx: RenderContext): Body {
  const base = ctx.publicUrl.origin;
  switch (t.kind) {
    case 'verification':
      return {
        subject: 'Confirm your email address for Paddock',
        paragraphs: [
          'Welcome to Paddock. Confirm your email address to finish creating your account.',
          `The link works once and expires in 48 hours. From the command line, paste this token instead: ${t.token}`,
          'If you did not create an account, ignore this email.',
        ],
        action: { label: 'Confirm email address', url: link(ctx.publicUrl, '/auth/verify', t.token) },
      };
    case 'welcome':
      return {
        subject: 'Your Paddock account is ready',
        paragraphs: [
          'Your email address is confirmed and your account is ready.',
          `Sign in at ${base} to create an API key, an environment and your first agent.`,
        ],
      };
    case 'password_reset':
      return {
        subject: 'Reset your Paddock password',
        paragraphs: [
          'Someone (hopefully you) asked to reset the password of your Paddock account.',
          `The link works once and expires in one hour. Token: ${t.token}`,
          'If you did not ask for this, ignore this email: your password stays unchanged.',
        ],
        action: { label: 'Choose a new password', url: link(ctx.publicUrl, '/reset-password', t.token) },
      };
    case 'email_change_confirm':
      return {
        subject: 'Confirm your new email address for Paddock',
        paragraphs: [
          `Confirm that ${t.newEmail} should become the sign-in address of your Paddock account.`,
          `The link works once and expires in 24 hours. Token: ${t.token}`,
          'If you did not ask for this, ignore this email.',
        ],
        action: { label: 'Confirm new address', url: link(ctx.publicUrl, '/auth/confirm-email', t.token) },
      };
    case 'email_change_notice':
      return {
        subject: 'Your Paddock email address is being changed',
        paragraphs: [
          `A request was made to change the sign-in address of your Paddock account to ${t.newEmail}.`,
          'The change takes effect only after the new address is confirmed.',
          'If this was not you, change your password now and contact support.',
        ],
      };
    case 'email_taken_notice':
      return {
        subject: 'Someone tried to move a Paddock account to your address',
        paragraphs: [
          'A signed-in Paddock user asked to make this address the sign-in address of their account, but this address already belongs to a Paddock account, so nothing was changed.',
          `If that was you, sign in at ${base} with this address instead. If it was not, you need not do anything.`,
        ],
      };
    case 'password_changed': {
      const keys =
        t.keys.length === 0
          ? ['Your account has no active API keys.']
          : [
              `These API keys still work (they are integrations and survive a password ${t.via}):`,
              ...t.keys.map(
                (k) =>
                  `${k.name} (${k.prefix}…), created ${k.createdAt.toISOString().slice(0, 10)}, ${
                    k.lastUsedAt ? `last used ${k.lastUsedAt.toISOString().slice(0, 10)}` : 'never used'
                  }`,
              ),
              `Revoke any you do not recognise at ${base}, or send revoke_api_keys: true with your next password change.`,
            ];
      return {
        subject: 'Your Paddock password was changed',
        paragraphs: [
          t.via === 'reset'
            ? 'The password of your Paddock account was reset with a link sent to this address. Every session was signed out and pending email-change links no longer work.'
            : t.via === 'admin'
              ? 'An administrator set a temporary password for your Paddock account. Every session was signed out and pending email-change and reset links no longer work. Sign in with it and choose your own on the Account page.'
              : 'The password of your Paddock account was changed. Every other session was signed out and pending email-change and reset links no longer work.',
          ...keys,
          'If this was not you, reset your password now and contact support.',
        ],
      };
    }
    case 'suspended':
      return {
        subject: 'Your Paddock account has been suspended',
        paragraphs: [
          'Your Paddock account has been suspended by an administrator. You cannot sign in or start conversations while it is suspended.',
          'Reply to this email or contact support if you believe this is a mistake.',
        ],
      };
    case 'unsuspended':
      return {
        subject: 'Your Paddock account has been reinstated',
        paragraphs: ['Your Paddock account is active again. You can sign in as before.'],
      };
    case 'export_ready':
      return {
        subject: 'Your Paddock data export is ready',
        paragraphs: [
          `The export of your Paddock account you asked for is ready (${humanBytes(t.sizeBytes)}, gzipped JSON).`,
          `Download it from the Account page, or with \`paddock export\`, until ${t.expiresAt.toISOString().slice(0, 16).replace('T', ' ')} UTC; it is deleted then.`,
          'If you did not ask for it, change your password and revoke your API keys now: someone else signed in as you.',
        ],
        action: { label: 'Open the Account page', url: link(ctx.publicUrl, '/account') },
      };
    case 'account_deleted':
      return {
        subject: 'Your Paddock account has been deleted',
        paragraphs: [
          'Your Paddock account and everything in it have been deleted: its conversations and their sandboxes, environments, vaults and their secrets, agents, API keys, sessions and inference credentials.',
          'The data cannot be recovered. You can register again with this address at any time; the new account starts empty.',
          'If you did not ask for this, contact support.',
        ],
      };
  }
}

export function renderMail(t: MailTemplate, ctx: RenderContext): RenderedMail {
  return layoutMail(body(t, ctx), ctx);
}

/** The text and HTML of every notification: paragraphs, the action link, support, signature. */
export function layoutMail(b: MailBody, ctx: RenderContext): RenderedMail {
  const support = ctx.supportEmail ? `Questions? Write to ${ctx.supportEmail}.` : undefined;
  const text = [
    ...b.paragraphs,
    ...(b.action ? [`${b.action.label}: ${b.action.url}`] : []),
    ...(support ? [support] : []),
    '— Paddock',
  ].join('\n\n');
  const html = [
    '<!doctype html><html><body style="font-family:sans-serif;line-height:1.5">',
    ...b.paragraphs.map((p) => `<p>${escapeHtml(p)}</p>`),
    ...(b.action ? [`<p><a href="${escapeHtml(b.action.url)}">${escapeHtml(b.action.label)}</a></p>`] : []),
    ...(support ? [`<p>${escapeHtml(support)}</p>`] : []),
    '<p>— Paddock</p></body></html>',
  ].join('\n');
  return { subject: b.subject, text, html };
}
