import { type Kysely, sql } from 'kysely';

// Billing (BILLING_ENABLED, docs/billing.md). With billing off neither table holds a row, so an
// account carries no subscription or trial state (spec: subscription_status null).
//
// billing_accounts: one row per account once billing is on. `subscription_id` is the
// subscription of record: webhook events for any other subscription never touch the row.
// `state_at` is the processor's `created` time of the event whose state the row holds: an event
// older than it never overwrites newer state. `legacy` marks accounts that predate billing
// (the expire-legacy-trials release task starts their trial clock); a row with no trial end
// that is not legacy fails the gate closed. The `*_notified_at` columns keep each lifecycle
// mail to one send.
//
// billing_events: the claim of each processor event id. The webhook claims and applies in one
// transaction; a failed apply rolls back and is then recorded with outcome 'failed' (listed on
// the admin pages), and its redelivery claims it again. Pruned after 90 days (retention).
// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE billing_accounts (
      user_id uuid PRIMARY KEY REFERENCES users(id) ON DELETE CASCADE,
      customer_id text UNIQUE,
      subscription_id text UNIQUE,
      status text NOT NULL CHECK (status IN ('trialing', 'active', 'past_due', 'canceled', 'comped')),
      trial_ends_at timestamptz,
      current_period_end timestamptz,
      cancel_at_period_end boolean NOT NULL DEFAULT false,
      state_at timestamptz,
      legacy boolean NOT NULL DEFAULT false,
      trial_ending_notified_at timestamptz,
      trial_expired_notified_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db);
  await sql`CREATE INDEX billing_accounts_trialing_idx ON billing_accounts (trial_ends_at)
    WHERE status = 'trialing'`.execute(db);
  await sql`
    CREATE TABLE billing_events (
      id text PRIMARY KEY,
      type text NOT NULL,
      subscription_id text,
      user_id uuid REFERENCES users(id) ON DELETE CASCADE,
      created_at timestamptz NOT NULL,
      received_at timestamptz NOT NULL DEFAULT now(),
      applied_at timestamptz,
      outcome text NOT NULL DEFAULT 'applied' CHECK (outcome IN ('applied', 'ignored', 'failed')),
      error text,
      attempts integer NOT NULL DEFAULT 1
    )`.execute(db);
  await sql`CREATE INDEX billing_events_received_idx ON billing_events (received_at)`.execute(db);
  await sql`CREATE INDEX billing_events_failed_idx ON billing_events (received_at DESC)
    WHERE outcome = 'failed'`.execute(db);
}
