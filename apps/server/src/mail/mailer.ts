// One mailer interface, three transports chosen by configuration:
// - SMTP through nodemailer (SMTP_HOST, SMTP_PORT default 587). Port 465 uses implicit TLS;
//   other ports upgrade with STARTTLS when the server offers it, and STARTTLS is REQUIRED
//   whenever SMTP_USERNAME is set, so credentials never cross the wire in plain text.
//   No username = unauthenticated relay.
// - An HTTP mail provider (EMAIL_PROVIDER_API_KEY): Postmark's JSON API,
//   `POST {EMAIL_PROVIDER_BASE_URL or https://api.postmarkapp.com}/email` with the
//   `X-Postmark-Server-Token` header.
// - none (EMAIL_DELIVERY=none): nothing is sent. In development (NODE_ENV unset or
//   `development`: `npm start`) every mail is printed to the server's log instead, recipient,
//   subject and text with its links, as the console mail backends of the usual frameworks do:
//   a reset link is a credential, and printing it to the operator's own terminal is the point
//   there. Anywhere else (production, tests) callers do not even enqueue (mail.queue.ts), so
//   no link ever reaches a log that is shipped elsewhere.
// A send either resolves (accepted by the relay/provider) or throws; the mail job retries.
import nodemailer from 'nodemailer';
import type { Config } from '../config/config.ts';
import type { Logger } from '../observability/logger.ts';

export interface OutgoingMail {
  to: string;
  subject: string;
  text: string;
  html: string;
}

export interface Mailer {
  /** `printed`: EMAIL_DELIVERY=none in development, each mail goes to the log (printsMail). */
  readonly kind: 'smtp' | 'api' | 'none' | 'printed';
  send(mail: OutgoingMail): Promise<void>;
  close(): void;
}

export const POSTMARK_BASE_URL = 'https://api.postmarkapp.com';
const SEND_TIMEOUT_MS = 15_000;

export function defaultFrom(config: Config): string {
  return config.mail.from ?? `Paddock <no-reply@${config.publicUrl.hostname}>`;
}

/** Whether mails are printed to the log instead of sent: EMAIL_DELIVERY=none in development only. */
export function printsMail(config: Config): boolean {
  return config.mail.transport.kind === 'none' && config.nodeEnv === 'development';
}

/** The printed form of a mail: who, what, and the text (with its links) indented under it. */
export function printedMail(mail: OutgoingMail): string {
  const body = mail.text
    .trimEnd()
    .split('\n')
    .map((line) => (line ? `    ${line}` : ''))
    .join('\n');
  return `mail not sent (EMAIL_DELIVERY=none), printed here:\n  To: ${mail.to}\n  Subject: ${mail.subject}\n\n${body}\n`;
}

export function createMailer(config: Config, logger?: Logger): Mailer {
  const t = config.mail.transport;
  const from = defaultFrom(config);
  const replyTo = config.mail.supportEmail;
  if (t.kind === 'smtp') {
    const transporter = nodemailer.createTransport({
      host: t.host,
      port: t.port,
      secure: t.port === 465,
      requireTLS: t.port !== 465 && t.username !== undefined,
      ...(t.username ? { auth: { user: t.username, pass: t.password ?? '' } } : {}),
      connectionTimeout: SEND_TIMEOUT_MS,
      greetingTimeout: SEND_TIMEOUT_MS,
      socketTimeout: SEND_TIMEOUT_MS,
    });
    return {
      kind: 'smtp',
      async send(mail) {
        await transporter.sendMail({ from, ...(replyTo ? { replyTo } : {}), ...mail });
      },
      close: () => transporter.close(),
    };
  }
  if (t.kind === 'api') {
    const base = t.baseUrl ?? POSTMARK_BASE_URL;
    return {
      kind: 'api',
      async send(mail) {
        const res = await fetch(`${base}/email`, {
          method: 'POST',
          headers: {
            accept: 'application/json',
            'content-type': 'application/json',
            'x-postmark-server-token': t.apiKey,
          },
          body: JSON.stringify({
            From: from,
            To: mail.to,
            ...(replyTo ? { ReplyTo: replyTo } : {}),
            Subject: mail.subject,
            TextBody: mail.text,
            HtmlBody: mail.html,
            MessageStream: 'outbound',
          }),
          signal: AbortSignal.timeout(SEND_TIMEOUT_MS),
        });
        if (!res.ok) {
          // The provider's error text names the problem (bad sender, inactive recipient); it never
          // echoes our token, so it is safe to carry into the job's last_error.
          const detail = (await res.text().catch(() => '')).slice(0, 300);
          throw new Error(`mail provider answered ${res.status}: ${detail}`);
        }
      },
      close: () => {},
    };
  }
  if (printsMail(config) && logger) {
    return {
      kind: 'printed',
      async send(mail) {
        logger.info(printedMail(mail));
      },
      close: () => {},
    };
  }
  return {
    kind: 'none',
    async send() {},
    close: () => {},
  };
}
