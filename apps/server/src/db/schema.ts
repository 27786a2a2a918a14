// Kysely types for every table. Each domain declares its tables in its own
// `<domain>.tables.ts` and they are combined here.
export interface PaddockMigrationsTable {
  name: string;
  applied_at: Date;
}

export interface Database {
  paddock_migrations: PaddockMigrationsTable;
}
