// The billing lifecycle mails (spec: Outgoing notification emails): trial ending (3 days
// before), trial expired, payment failed, payment action required, payment recovered,
// subscription canceled. What must hold (test/billing.mail.test.ts):
// - A mail is enqueued in the transaction of the state change that causes it (the webhook's
//   claim and apply, the trial sweeper's mark), under a savepoint: the job exists exactly when
//   the change commits, and a failed enqueue rolls back only itself, is logged, and never fails
//   the webhook or the sweep (spec: "enqueue or delivery failures never error the webhook").
// - The job names the account and the kind, nothing else; the send re-checks the account's
//   billing row (a recovery that arrived before the payment-failed mail was sent drops it).
// - Under EMAIL_DELIVERY=none nothing is enqueued (mail.queue.ts `made`), as for every mail.
// - A failed send is retried with the mail backoff (MAIL_RETRY_BASE_MS, MAIL_MAX_ATTEMPTS).
// - Every link is built from PUBLIC_URL: the billing page, never a processor-provided URL.

import type { Task } from 'graphile-worker';
import { sql } from 'kysely';
import { z } from 'zod';
import { retryDelayMs } from '../accounts/accounts.notifications.ts';
import { findUserById } from '../accounts/accounts.repo.ts';
import type { Config } from '../config/config.ts';
import type { Db } from '../db/database.ts';
import { enqueueJob } from '../jobs/worker.ts';
import type { MailQueue } from '../mail/mail.queue.ts';
import type { Mailer } from '../mail/mailer.ts';
import { layoutMail, link, type MailBody, type RenderContext } from '../mail/templates.ts';
import type { Logger } from '../observability/logger.ts';
import type { SubscriptionStatus } from './billing.tables.ts';

export const BILLING_MAIL_TASK = 'send_billing_mail';

export const BILLING_MAIL_KINDS = [
  'trial_ending',
  'trial_expired',
  'payment_failed',
  'payment_action_required',
  'payment_recovered',
  'subscription_canceled',
] as const;

export type BillingMailKind = (typeof BILLING_MAIL_KINDS)[number];

const Payload = z.object({
  kind: z.enum(BILLING_MAIL_KINDS),
  userId: z.uuid(),
  attempt: z.number().int().positive().optional(),
});
type BillingMailJob = z.infer<typeof Payload>;

/**
 * Enqueues the mails on `trx` (the state change's transaction) under a savepoint. Returns how
 * many were enqueued; a failure is logged and swallowed, leaving the transaction usable.
 */
export async function enqueueBillingMails(
  trx: Db,
  deps: { mailQueue: Pick<MailQueue, 'made'>; logger: Logger },
  userId: string,
  kinds: readonly BillingMailKind[],
): Promise<number> {
  if (kinds.length === 0 || !deps.mailQueue.made) return 0;
  await sql`SAVEPOINT billing_mail`.execute(trx);
  try {
    for (const kind of kinds) {
      await enqueueJob(trx, BILLING_MAIL_TASK, { kind, userId }, { maxAttempts: 5 });
    }
    await sql`RELEASE SAVEPOINT billing_mail`.execute(trx);
    return kinds.length;
  } catch (err) {
    await sql`ROLLBACK TO SAVEPOINT billing_mail`.execute(trx);
    const reason = err instanceof Error ? err.message : String(err);
    deps.logger.error({ component: 'billing', userId, kinds, reason }, 'billing mail not enqueued');
    return 0;
  }
}

interface MailState {
  status: SubscriptionStatus;
  trialEndsAt: Date | null;
}

const day = (d: Date) => d.toISOString().slice(0, 10);

/** The mail, or null when the account's state no longer calls for it (re-checked at send time). */
export function billingMailBody(
  kind: BillingMailKind,
  state: MailState,
  ctx: RenderContext,
): MailBody | null {
  const billing = { label: 'Open the billing page', url: link(ctx.publicUrl, '/account/billing') };
  switch (kind) {
    case 'trial_ending':
      if (state.status !== 'trialing' || !state.trialEndsAt) return null;
      return {
        subject: 'Your Paddock trial ends in 3 days',
        paragraphs: [
          `Your Paddock trial ends on ${day(state.trialEndsAt)} (UTC).`,
          'Subscribe on the billing page to keep starting conversations after that. Your conversations, environments and agents stay either way.',
        ],
        action: { ...billing, label: 'Subscribe' },
      };
    case 'trial_expired':
      if (state.status === 'active' || state.status === 'comped') return null;
      return {
        subject: 'Your Paddock trial has ended',
        paragraphs: [
          'Your Paddock trial has ended. You can still sign in and read your past conversations, but you cannot start new ones or send prompts.',
          'Subscribe on the billing page to continue where you left off.',
        ],
        action: { ...billing, label: 'Subscribe' },
      };
    case 'payment_failed':
      if (state.status !== 'past_due') return null;
      return {
        subject: 'Your Paddock payment failed',
        paragraphs: [
          'We could not collect the payment for your Paddock subscription. Until it goes through you can read your past conversations but not start new ones or send prompts.',
          'Update your payment method on the billing page; the payment is retried automatically.',
        ],
        action: { ...billing, label: 'Update payment method' },
      };
    case 'payment_action_required':
      if (state.status === 'canceled') return null;
      return {
        subject: 'Your Paddock payment needs your confirmation',
        paragraphs: [
          'Your bank asks you to confirm the payment for your Paddock subscription before it can go through.',
          'Confirm it from the billing page (it opens the payment portal).',
        ],
        action: { ...billing, label: 'Confirm payment' },
      };
    case 'payment_recovered':
      if (state.status !== 'active') return null;
      return {
        subject: 'Your Paddock payment went through',
        paragraphs: [
          'Thank you: the payment for your Paddock subscription went through and your subscription is active again. You can start conversations as before.',
        ],
      };
    case 'subscription_canceled':
      if (state.status !== 'canceled') return null;
      return {
        subject: 'Your Paddock subscription has been canceled',
        paragraphs: [
          'Your Paddock subscription has been canceled. You can still sign in and read your past conversations, but you cannot start new ones or send prompts.',
          'You can subscribe again at any time from the billing page.',
        ],
        action: { ...billing, label: 'Subscribe again' },
      };
  }
}

/** The `send_billing_mail` job: renders against the account's current billing row and sends. */
export function createBillingMailTask(deps: {
  db: Db;
  config: Config;
  mailer: Mailer;
  logger: Logger;
}): Task {
  const log = deps.logger.child({ component: 'mail' });
  const ctx = { publicUrl: deps.config.publicUrl, supportEmail: deps.config.mail.supportEmail };
  return async (rawPayload) => {
    const parsed = Payload.safeParse(rawPayload);
    if (!parsed.success) {
      log.error('billing mail job with a malformed payload: dropped');
      return;
    }
    const job: BillingMailJob = parsed.data;
    const user = await findUserById(deps.db, job.userId);
    const row = await deps.db
      .selectFrom('billing_accounts')
      .select(['status', 'trial_ends_at'])
      .where('user_id', '=', job.userId)
      .executeTakeFirst();
    if (!user || !row) return;
    const body = billingMailBody(job.kind, { status: row.status, trialEndsAt: row.trial_ends_at }, ctx);
    if (!body) {
      log.info({ kind: job.kind, userId: user.id }, 'billing mail dropped: the account moved on');
      return;
    }
    const attempt = job.attempt ?? 1;
    try {
      await deps.mailer.send({ to: user.email, ...layoutMail(body, ctx) });
      log.info(
        { kind: job.kind, userId: user.id, attempt },
        deps.mailer.kind === 'printed' ? 'billing mail printed' : 'billing mail sent',
      );
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      const { baseMs, maxAttempts } = deps.config.mail.retry;
      if (attempt >= maxAttempts) {
        log.error({ kind: job.kind, userId: user.id, attempt, reason }, 'billing mail failed: giving up');
        return;
      }
      const delay = retryDelayMs(baseMs, attempt);
      await enqueueJob(
        deps.db,
        BILLING_MAIL_TASK,
        { ...job, attempt: attempt + 1 },
        { maxAttempts: 5, runAt: new Date(Date.now() + delay) },
      );
      log.warn(
        { kind: job.kind, userId: user.id, attempt, retryInMs: delay, reason },
        'billing mail failed: will retry',
      );
    }
  };
}
