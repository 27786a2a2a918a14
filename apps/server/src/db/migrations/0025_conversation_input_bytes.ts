import { type Kysely, sql } from 'kysely';

// The bytes of prompts and images a conversation stores (conversations.service.ts: the input
// bound), counted as each turn is queued. Existing conversations start from what they hold.
// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE conversations ADD COLUMN input_bytes bigint NOT NULL DEFAULT 0`.execute(db);
  await sql`
    UPDATE conversations c SET input_bytes =
      (SELECT COALESCE(sum(octet_length(t.prompt)), 0) FROM turns t WHERE t.conversation_id = c.id)
      + (SELECT COALESCE(sum(octet_length(i.data)), 0) FROM turn_images i
           JOIN turns t ON t.id = i.turn_id WHERE t.conversation_id = c.id)`.execute(db);
}
