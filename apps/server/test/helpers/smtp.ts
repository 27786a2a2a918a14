// A real SMTP server on loopback (the smtp-server package) that captures every message,
// so mail tests exercise nodemailer end to end. It can be stopped and started again on the
// same port to simulate an outage.
import { once } from 'node:events';
import { SMTPServer } from 'smtp-server';
import { freePort } from '../../src/db/embedded.ts';

export interface CapturedMail {
  from: string;
  to: string[];
  raw: string;
  subject: string;
  /** The raw message with quoted-printable soft breaks and escapes decoded. */
  decoded: string;
}

export interface SmtpCapture {
  port: number;
  mails: CapturedMail[];
  start(): Promise<void>;
  stop(): Promise<void>;
  /** Resolves with the first captured mail to `to` matching `subject`, waiting up to timeoutMs. */
  waitFor(to: string, subject: RegExp, timeoutMs?: number): Promise<CapturedMail>;
}

export function decodeQuotedPrintable(raw: string): string {
  return raw
    .replace(/=\r?\n/g, '')
    .replace(/=([0-9A-F]{2})/g, (_m, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}

/** The `token` query parameter of the first link in a mail. */
export function tokenFrom(mail: CapturedMail): string {
  const m = /[?&]token=([A-Za-z0-9_-]+)/.exec(mail.decoded);
  if (!m?.[1]) throw new Error(`no token link in mail "${mail.subject}"`);
  return m[1];
}

export async function createSmtpCapture(options: { start?: boolean } = {}): Promise<SmtpCapture> {
  const port = await freePort();
  const mails: CapturedMail[] = [];
  let server: SMTPServer | undefined;

  const capture: SmtpCapture = {
    port,
    mails,
    async start() {
      server = new SMTPServer({
        authOptional: true,
        disabledCommands: ['STARTTLS', 'AUTH'],
        logger: false,
        onData(stream, session, callback) {
          const chunks: Buffer[] = [];
          stream.on('data', (c: Buffer) => chunks.push(c));
          stream.on('end', () => {
            const raw = Buffer.concat(chunks).toString('utf8');
            const decoded = decodeQuotedPrintable(raw);
            mails.push({
              from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
              to: session.envelope.rcptTo.map((r) => r.address),
              raw,
              subject: /^Subject: (.*)$/m.exec(decoded)?.[1]?.trim() ?? '',
              decoded,
            });
            callback();
          });
        },
      });
      server.listen(port, '127.0.0.1');
      await once(server.server, 'listening');
    },
    async stop() {
      const s = server;
      server = undefined;
      if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
    },
    async waitFor(to, subject, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const found = mails.find(
          (m) => m.to.some((r) => r.toLowerCase() === to.toLowerCase()) && subject.test(m.subject),
        );
        if (found) return found;
        if (Date.now() > deadline) {
          throw new Error(
            `no mail to ${to} matching ${subject} (have: ${mails.map((m) => `${m.to} ${m.subject}`).join('; ')})`,
          );
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    },
  };
  if (options.start !== false) await capture.start();
  return capture;
}
