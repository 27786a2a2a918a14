import { type Kysely, sql } from 'kysely';

// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function up(db: Kysely<any>): Promise<void> {
  // UUIDv7 ids are generated in the application (time-ordered); the database only stores them.
  await sql`CREATE EXTENSION IF NOT EXISTS citext`.execute(db);
}
