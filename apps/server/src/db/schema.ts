// Kysely types for every table. Each domain declares its tables in its own
// `<domain>.tables.ts` and they are combined here.
import type { AccountsTables } from '../accounts/accounts.tables.ts';

export interface PaddockMigrationsTable {
  name: string;
  applied_at: Date;
}

export interface Database extends AccountsTables {
  paddock_migrations: PaddockMigrationsTable;
}
