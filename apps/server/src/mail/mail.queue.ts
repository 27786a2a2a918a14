// Enqueues account notification mails as durable jobs. Under EMAIL_DELIVERY=none nothing
// is enqueued at all (the spec: sending is skipped), except in development, where the mails
// are made as usual and printed to the log instead of sent (mailer.ts printsMail).
import type { Config } from '../config/config.ts';
import type { Db } from '../db/database.ts';
import { enqueueJob } from '../jobs/worker.ts';
import { printsMail } from './mailer.ts';

export const ACCOUNT_MAIL_TASK = 'send_account_mail';

export type AccountMailKind =
  | 'verification'
  | 'welcome'
  | 'password_reset'
  | 'email_change_confirm'
  | 'email_change_notice'
  | 'email_taken_notice'
  | 'password_changed'
  | 'suspended'
  | 'unsuspended'
  | 'export_ready'
  | 'account_deleted';

/**
 * A job names the notification and the user, never a secret: tokens are minted by the job
 * itself at send time, so no plaintext token waits in the queue table.
 */
export interface AccountMailJob {
  kind: AccountMailKind;
  /** The account; or, for the mails a caller asks for by address, `email` instead. */
  userId?: string;
  /**
   * verification / password_reset requested by address: the job, not the request, finds
   * out whether an account has it, so the request does the same work for any address.
   */
  email?: string;
  /** password_reset requested by address: the caller's IP, for the audit row. */
  ip?: string | null;
  /** email_change_confirm / email_change_notice / email_taken_notice: the requested new address. */
  newEmail?: string;
  /** email_change_confirm: when it was requested (ISO); dropped if credentials changed since. */
  requestedAt?: string;
  /** password_changed: what changed it. */
  via?: 'reset' | 'change' | 'admin';
  /**
   * email_change_notice: the old address, which is no longer on the account once confirmed.
   * account_deleted: the deleted account's address (the account is gone; the job has no user).
   */
  to?: string;
  /** export_ready: the export that is ready (re-checked at send time). */
  exportId?: string;
  /** 1-based send attempt; set by the retry path. */
  attempt?: number;
}

export interface MailQueue {
  /**
   * Mail reaches people (a provider or SMTP is configured). False under EMAIL_DELIVERY=none,
   * printed or not: accounts then self-verify and an email change applies at once.
   */
  readonly enabled: boolean;
  /** Mail is made at all: sent (enabled), or printed to the log in development. */
  readonly made: boolean;
  enqueue(db: Db, job: AccountMailJob, opts?: { runAt?: Date }): Promise<void>;
}

export function createMailQueue(deps: { config: Config }): MailQueue {
  const enabled = deps.config.mail.transport.kind !== 'none';
  const made = enabled || printsMail(deps.config);
  return {
    enabled,
    made,
    async enqueue(db, job, opts = {}) {
      if (!made) return;
      await enqueueJob(
        db,
        ACCOUNT_MAIL_TASK,
        { ...job },
        {
          // Failures of the send itself are retried by the handler with the configured backoff;
          // graphile-worker's own retries cover unexpected errors (e.g. the database blipped).
          maxAttempts: 5,
          ...(opts.runAt ? { runAt: opts.runAt } : {}),
        },
      );
    },
  };
}
