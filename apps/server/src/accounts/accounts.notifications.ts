// The `send_account_mail` job: renders and sends one account notification. Invariants
// (mail.test.ts):
// - The conditions are re-checked at send time: no verification mail to a verified or
//   suspended account, a suspension notice only while still suspended (and the reverse),
//   the welcome mail at most once per user (users.welcome_sent_at claimed before sending).
// - Link tokens are minted here, at send time, and stored hashed: the queue never holds a
//   secret. A failed send deletes the token it minted.
// - A failed send is retried by re-enqueueing the job with a delay of
//   MAIL_RETRY_BASE_MS * 2^(attempt-1), capped at one hour, up to MAIL_MAX_ATTEMPTS sends;
//   the current job then completes. (A crash between the two may send twice; never zero.)
// - Mails asked for by address (verification, password reset) carry the address, not the
//   user: the lookup happens here, so the request did the same work for any address. An
//   unknown address ends the job silently; nothing logs the address.
// - The mails a caller can trigger (CAPPED) go to one address at most
//   MAIL_PER_RECIPIENT_PER_HOUR times per rolling hour (a slot is claimed on the first
//   attempt only); the rest are dropped here while the caller got the same answer.
// - An email-change link requested before the account's last password reset or change, or
//   for a suspended account, is never minted (credentials_changed_at): a reset ends a
//   takeover in progress.
// - The deletion notice (account_deleted) has no account left to look up or re-check: the job
//   carries the address, enqueued by the deletion's transaction (account-deletion.ts).
import type { Task } from 'graphile-worker';
import { z } from 'zod';
import { findExport } from '../account-exports/account-exports.repo.ts';
import type { AuditService } from '../audit/audit.service.ts';
import { listActiveApiKeys } from '../auth/api-keys.repo.ts';
import { generateSecret } from '../auth/tokens.ts';
import type { Config } from '../config/config.ts';
import type { Db } from '../db/database.ts';
import type { AccountMailJob, MailQueue } from '../mail/mail.queue.ts';
import type { Mailer } from '../mail/mailer.ts';
import { type MailTemplate, renderMail } from '../mail/templates.ts';
import type { Logger } from '../observability/logger.ts';
import {
  claimWelcome,
  credentialsChangedAt,
  deleteEmailToken,
  findUserByEmail,
  findUserById,
  insertEmailToken,
  releaseWelcome,
} from './accounts.repo.ts';
import { EMAIL_CHANGE_TTL_MS, PASSWORD_RESET_TTL_MS, VERIFICATION_TTL_MS } from './accounts.service.ts';
import { claimMailSlot } from './throttles.repo.ts';

const MAX_RETRY_DELAY_MS = 60 * 60 * 1000;

const Payload = z.object({
  kind: z.enum([
    'verification',
    'welcome',
    'password_reset',
    'email_change_confirm',
    'email_change_notice',
    'email_taken_notice',
    'password_changed',
    'suspended',
    'unsuspended',
    'export_ready',
    'account_deleted',
  ]),
  userId: z.string().optional(),
  email: z.string().optional(),
  ip: z.string().nullable().optional(),
  newEmail: z.string().optional(),
  requestedAt: z.iso.datetime().optional(),
  via: z.enum(['reset', 'change', 'admin']).optional(),
  to: z.string().optional(),
  exportId: z.uuid().optional(),
  attempt: z.number().int().positive().optional(),
});

/** The mails a caller can make us send: capped per recipient. */
const CAPPED: ReadonlySet<AccountMailJob['kind']> = new Set([
  'verification',
  'password_reset',
  'email_change_confirm',
  'email_change_notice',
  'email_taken_notice',
]);

export function retryDelayMs(baseMs: number, attempt: number): number {
  return Math.min(baseMs * 2 ** Math.max(0, attempt - 1), MAX_RETRY_DELAY_MS);
}

export function createAccountMailTask(deps: {
  db: Db;
  config: Config;
  mailer: Mailer;
  mailQueue: MailQueue;
  audit: AuditService;
  logger: Logger;
}): Task {
  const log = deps.logger.child({ component: 'mail' });
  const ctx = { publicUrl: deps.config.publicUrl, supportEmail: deps.config.mail.supportEmail };

  /**
   * The deletion notice: the account is gone, so the job carries its address (`to`) and there
   * is no user to re-check. Retried like any mail; nothing logs the address.
   */
  const sendDeletionNotice = async (job: AccountMailJob): Promise<void> => {
    if (!job.to) return;
    const attempt = job.attempt ?? 1;
    try {
      await deps.mailer.send({ to: job.to, ...renderMail({ kind: 'account_deleted' }, ctx) });
      log.info(
        { kind: job.kind, attempt },
        deps.mailer.kind === 'printed' ? 'account mail printed' : 'account mail sent',
      );
    } catch (err) {
      await retryOrGiveUp(job, attempt, err, {});
    }
  };

  /** A failed send: re-enqueued with the backoff, or dropped after the last attempt. */
  const retryOrGiveUp = async (
    job: AccountMailJob,
    attempt: number,
    err: unknown,
    fields: { userId?: string },
  ): Promise<void> => {
    const reason = err instanceof Error ? err.message : String(err);
    const { baseMs, maxAttempts } = deps.config.mail.retry;
    if (attempt >= maxAttempts) {
      log.error({ kind: job.kind, ...fields, attempt, reason }, 'account mail failed: giving up');
      return;
    }
    const delay = retryDelayMs(baseMs, attempt);
    await deps.mailQueue.enqueue(
      deps.db,
      { ...job, attempt: attempt + 1 },
      { runAt: new Date(Date.now() + delay) },
    );
    log.warn(
      { kind: job.kind, ...fields, attempt, retryInMs: delay, reason },
      'account mail failed: will retry',
    );
  };

  return async (rawPayload) => {
    const parsed = Payload.safeParse(rawPayload);
    if (!parsed.success) {
      log.error('account mail job with a malformed payload: dropped');
      return;
    }
    const job: AccountMailJob = parsed.data;
    if (job.kind === 'account_deleted') {
      await sendDeletionNotice(job);
      return;
    }
    const user = job.userId
      ? await findUserById(deps.db, job.userId)
      : job.email
        ? await findUserByEmail(deps.db, job.email)
        : undefined;
    if (!user) return;
    const attempt = job.attempt ?? 1;

    let to = user.email;
    let template: MailTemplate;
    let tokenId: string | undefined;
    let claimedWelcome = false;
    const mint = async (purpose: 'verify_email' | 'password_reset' | 'email_change', ttlMs: number) => {
      const token = generateSecret();
      tokenId = await insertEmailToken(deps.db, user.id, {
        purpose,
        token,
        ttlMs,
        ...(job.newEmail ? { newEmail: job.newEmail } : {}),
      });
      return token;
    };

    switch (job.kind) {
      case 'verification':
        if (user.email_verified_at !== null || user.suspended_at !== null) return;
        template = { kind: 'verification', token: await mint('verify_email', VERIFICATION_TTL_MS) };
        break;
      case 'welcome':
        if (user.email_verified_at === null || !(await claimWelcome(deps.db, user.id))) return;
        claimedWelcome = true;
        template = { kind: 'welcome' };
        break;
      case 'password_reset':
        if (user.suspended_at !== null) return;
        if (attempt === 1 && !job.userId) {
          await deps.audit.record({
            type: 'user.password_reset_requested',
            tenantId: user.id,
            actor: { kind: 'system', userId: null, apiKeyId: null },
            ip: job.ip ?? null,
          });
        }
        template = { kind: 'password_reset', token: await mint('password_reset', PASSWORD_RESET_TTL_MS) };
        break;
      case 'email_change_confirm': {
        if (!job.newEmail || user.suspended_at !== null) return;
        const changedAt = await credentialsChangedAt(deps.db, user.id);
        if (changedAt && (!job.requestedAt || new Date(job.requestedAt) <= changedAt)) {
          log.info({ kind: job.kind, userId: user.id }, 'account mail dropped: credentials changed since');
          return;
        }
        to = job.newEmail;
        template = {
          kind: 'email_change_confirm',
          newEmail: job.newEmail,
          token: await mint('email_change', EMAIL_CHANGE_TTL_MS),
        };
        break;
      }
      case 'email_change_notice':
        if (!job.newEmail) return;
        to = job.to ?? user.email;
        template = { kind: 'email_change_notice', newEmail: job.newEmail };
        break;
      case 'email_taken_notice':
        if (!job.newEmail) return;
        to = job.newEmail;
        template = { kind: 'email_taken_notice' };
        break;
      case 'password_changed':
        template = {
          kind: 'password_changed',
          via: job.via ?? 'change',
          keys: (await listActiveApiKeys(deps.db, user.id)).map((k) => ({
            name: k.name,
            prefix: k.prefix,
            createdAt: k.created_at,
            lastUsedAt: k.last_used_at,
          })),
        };
        break;
      case 'suspended':
        if (user.suspended_at === null) return;
        template = { kind: 'suspended' };
        break;
      case 'unsuspended':
        if (user.suspended_at !== null) return;
        template = { kind: 'unsuspended' };
        break;
      case 'export_ready': {
        // Only while it can still be downloaded (it may have expired or gone with a retry's delay).
        const row = job.exportId ? await findExport(deps.db, user.id, job.exportId) : undefined;
        if (row?.status !== 'ready' || !row.expires_at || row.expires_at <= new Date()) return;
        template = {
          kind: 'export_ready',
          sizeBytes: Number(row.size_bytes ?? 0),
          expiresAt: row.expires_at,
        };
        break;
      }
    }

    if (
      CAPPED.has(job.kind) &&
      attempt === 1 &&
      !(await claimMailSlot(deps.db, to, deps.config.mail.perRecipientPerHour))
    ) {
      if (tokenId) await deleteEmailToken(deps.db, user.id, tokenId);
      log.info({ kind: job.kind, userId: user.id }, 'account mail dropped: recipient reached its hourly cap');
      return;
    }

    try {
      await deps.mailer.send({ to, ...renderMail(template, ctx) });
      log.info(
        { kind: job.kind, userId: user.id, attempt },
        deps.mailer.kind === 'printed' ? 'account mail printed' : 'account mail sent',
      );
    } catch (err) {
      if (tokenId) await deleteEmailToken(deps.db, user.id, tokenId);
      if (claimedWelcome) await releaseWelcome(deps.db, user.id);
      await retryOrGiveUp(job, attempt, err, { userId: user.id });
    }
  };
}
