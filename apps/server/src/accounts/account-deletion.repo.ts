// Which rows an account's deletion removes, in one place. Every table with a tenant or user
// column references users (directly, or through a parent table) ON DELETE CASCADE, so
// deleting the users row deletes them; the tables that cannot are listed here with what
// deletion does with them. test/accounts.deletion.test.ts reads the live schema and fails
// for any table with a `tenant_id` or `user_id` column that neither cascades from users nor
// is listed: a new tenant table cascades (preferred) or gets a line here.
import { sql } from 'kysely';
import type { Db } from '../db/database.ts';

export interface TenantRowsWithoutCascade {
  table: string;
  column: string;
  /** `delete`: removed by the deletion. `keep`: stays on purpose, for the reason given. */
  action: 'delete' | 'keep';
  why: string;
}

export const TENANT_ROWS_WITHOUT_CASCADE: readonly TenantRowsWithoutCascade[] = [
  {
    table: 'audit_events',
    column: 'tenant_id',
    action: 'delete',
    why: 'append-only and unreferenced; the deletion then writes its own record, the one row kept',
  },
  {
    table: 'sandbox_destroys',
    column: 'tenant_id',
    action: 'keep',
    why: 'a backend destroy still owed (a sandbox name only); the row goes when the backend confirms',
  },
  {
    table: 'billing_events',
    column: 'user_id',
    action: 'keep',
    why: "the payment processor's event claims (idempotency of its redeliveries); the foreign key sets user_id null, and the retention pruner removes the rows after 90 days",
  },
];

/** Inside the deletion transaction, the users row locked: the listed rows, then the account (cascading). */
export async function deleteTenantRows(db: Db, userId: string): Promise<void> {
  for (const t of TENANT_ROWS_WITHOUT_CASCADE) {
    if (t.action !== 'delete') continue;
    await sql`DELETE FROM ${sql.table(t.table)} WHERE ${sql.ref(t.column)} = ${userId}`.execute(db);
  }
  await db.deleteFrom('users').where('id', '=', userId).execute();
}

/**
 * PostgreSQL's foreign key violation by a row naming an account that no longer exists: a
 * write that waited on the deletion's lock of the users row and lost. The account is gone, as
 * are its credentials: the caller is answered as unauthenticated, never with a 500.
 */
export function referencesDeletedAccount(err: unknown): boolean {
  const e = err as { code?: unknown; detail?: unknown } | null;
  return (
    e?.code === '23503' &&
    typeof e.detail === 'string' &&
    e.detail.endsWith(' is not present in table "users".')
  );
}
