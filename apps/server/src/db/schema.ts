// Kysely types for every table. Each domain declares its tables in its own
// `<domain>.tables.ts` and they are combined here.
import type { AccountsTables } from '../accounts/accounts.tables.ts';
import type { AuditTables } from '../audit/audit.tables.ts';

export interface PaddockMigrationsTable {
  name: string;
  applied_at: Date;
}

export interface Database extends AccountsTables, AuditTables {
  paddock_migrations: PaddockMigrationsTable;
}
