// POST /api/billing/webhook: the payment processor's events (registered only with
// BILLING_ENABLED). What must hold (test/billing.webhooks.test.ts):
// - The signature is verified by the official SDK (`Stripe.webhooks.constructEvent`) on the
//   raw bytes of the body, as received (this route's own content-type parser keeps them), with
//   the SDK's 300 s tolerance. Several `v1=` signatures in the header (the processor signs with
//   the old and the new secret during a rotation) verify if any matches; BILLING_WEBHOOK_SECRET
//   may also list several secrets, comma-separated, tried in turn. No secret set: every request
//   is refused. A refusal is 400 invalid_signature and says nothing about why (the log does).
// - The claim of the event id and its apply share one transaction (webhook.repo.ts claimEvent,
//   webhook-apply.ts): 50 identical deliveries at once apply once, the other 49 answer 200
//   duplicate. A failed apply rolls back, is recorded with outcome 'failed' outside the
//   transaction (listed on /admin/billing) and answers 500 billing_event_failed, so the
//   processor redelivers it; the redelivery claims it again.
// - Lifecycle mails are enqueued in the same transaction under a savepoint (billing-mail.ts):
//   their failure never errors the webhook.
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import Stripe from 'stripe';
import { z } from 'zod';
import type { Config } from '../config/config.ts';
import type { Db } from '../db/database.ts';
import { AppError } from '../http/errors.ts';
import type { MailQueue } from '../mail/mail.queue.ts';
import type { Logger } from '../observability/logger.ts';
import { enqueueBillingMails } from './billing-mail.ts';
import { claimEvent, finishClaim, recordFailure } from './webhook.repo.ts';
import { type ApplyResult, applyEvent, type VerifiedEvent } from './webhook-apply.ts';

/** The SDK's default, stated: an event signed longer ago than this is refused (replay bound). */
export const WEBHOOK_TOLERANCE_SECONDS = 300;
/** Processor events are a few kilobytes; a subscription with many items stays well under this. */
export const WEBHOOK_BODY_LIMIT = 512 * 1024;
const MAX_ERROR_LENGTH = 500;

/** BILLING_WEBHOOK_SECRET as the list of secrets it names (comma-separated, blanks dropped). */
export function webhookSecrets(config: Config): string[] {
  return (config.billing.webhookSecret ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

const EventEnvelope = z.object({
  id: z.string().min(1).max(255),
  type: z.string().min(1).max(255),
  created: z.number().int().nonnegative(),
  data: z.object({ object: z.unknown() }),
});

const WebhookAck = z.object({
  received: z.literal(true),
  /** `duplicate`: this event id was already applied or ignored; nothing was done again. */
  outcome: z.enum(['applied', 'ignored', 'duplicate']),
});

export interface WebhookDeps {
  db: Db;
  config: Config;
  logger: Logger;
  mailQueue: Pick<MailQueue, 'made'>;
}

function refused(): AppError {
  return new AppError('invalid_signature', 'the webhook signature could not be verified');
}

/** The verified event, or throws 400 invalid_signature. */
export function verifyEvent(
  raw: Buffer,
  header: string | string[] | undefined,
  secrets: string[],
): VerifiedEvent {
  if (secrets.length === 0 || typeof header !== 'string' || header === '') throw refused();
  for (const secret of secrets) {
    let event: unknown;
    try {
      event = Stripe.webhooks.constructEvent(raw, header, secret, WEBHOOK_TOLERANCE_SECONDS);
    } catch {
      continue;
    }
    const parsed = EventEnvelope.safeParse(event);
    if (!parsed.success) throw new AppError('invalid_body', 'the event is not a payment-processor event');
    const { id, type, created, data } = parsed.data;
    return { id, type, created: new Date(created * 1000), object: data.object };
  }
  throw refused();
}

export function billingWebhookRoutes(deps: WebhookDeps): FastifyPluginAsync {
  const log = deps.logger.child({ component: 'billing' });
  return async (root) => {
    // This plugin's own parser: the body as bytes, whatever its media type (the signature
    // covers the exact bytes; re-serialized JSON would not verify).
    root.removeAllContentTypeParsers();
    root.addContentTypeParser(
      '*',
      { parseAs: 'buffer', bodyLimit: WEBHOOK_BODY_LIMIT },
      (_request, body, done) => {
        done(null, body);
      },
    );
    const app = root.withTypeProvider<ZodTypeProvider>();

    app.post(
      '/api/billing/webhook',
      {
        bodyLimit: WEBHOOK_BODY_LIMIT,
        schema: {
          tags: ['billing'],
          summary:
            "The payment processor's events (Stripe webhook), signed under BILLING_WEBHOOK_SECRET; idempotent by event id",
          response: { 200: WebhookAck },
        },
      },
      async (request) => {
        const raw = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
        const secrets = webhookSecrets(deps.config);
        let event: VerifiedEvent;
        try {
          event = verifyEvent(raw, request.headers['stripe-signature'], secrets);
        } catch (err) {
          log.warn(
            {
              reason:
                secrets.length === 0
                  ? 'BILLING_WEBHOOK_SECRET is not set'
                  : err instanceof AppError && err.code === 'invalid_body'
                    ? 'not an event'
                    : 'signature, secret or timestamp mismatch',
            },
            'billing webhook refused',
          );
          throw err;
        }
        const head = { id: event.id, type: event.type, createdAt: event.created };
        let result: ApplyResult | null;
        try {
          result = await deps.db.transaction().execute(async (trx) => {
            if (!(await claimEvent(trx, head))) return null;
            const applied = await applyEvent(trx, event);
            await finishClaim(trx, event.id, applied);
            if (applied.userId)
              await enqueueBillingMails(trx, { ...deps, logger: log }, applied.userId, applied.mails);
            return applied;
          });
        } catch (err) {
          const reason = (err instanceof Error ? err.message : String(err)).slice(0, MAX_ERROR_LENGTH);
          log.error(
            { eventId: event.id, type: event.type, reason },
            'billing event failed: recorded for redelivery',
          );
          await recordFailure(deps.db, head, reason).catch((recordErr: unknown) =>
            log.error(
              {
                eventId: event.id,
                reason: recordErr instanceof Error ? recordErr.message : String(recordErr),
              },
              'billing event failure not recorded',
            ),
          );
          throw new AppError(
            'billing_event_failed',
            'the event could not be applied; it is recorded and is applied when redelivered',
          );
        }
        if (!result) {
          log.info({ eventId: event.id, type: event.type }, 'billing event already processed');
          return { received: true as const, outcome: 'duplicate' as const };
        }
        log.info(
          {
            eventId: event.id,
            type: event.type,
            outcome: result.outcome,
            userId: result.userId,
            ...(result.reason ? { reason: result.reason } : {}),
          },
          'billing event processed',
        );
        return { received: true as const, outcome: result.outcome };
      },
    );
  };
}
