import { type Kysely, sql } from 'kysely';

// An agent's delegations (conversations/api/sandbox-key.ts): the agents on which a sandbox of a
// conversation of this agent may start sub-conversations beyond those it may start anyway (same
// environment, same vault or none). Deleting either agent removes the delegation.
// biome-ignore lint/suspicious/noExplicitAny: migrations are untyped by design
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE agent_delegates (
      tenant_id uuid NOT NULL,
      agent_id uuid NOT NULL,
      delegate_agent_id uuid NOT NULL,
      PRIMARY KEY (agent_id, delegate_agent_id),
      FOREIGN KEY (tenant_id, agent_id) REFERENCES agents (tenant_id, id) ON DELETE CASCADE,
      FOREIGN KEY (tenant_id, delegate_agent_id) REFERENCES agents (tenant_id, id) ON DELETE CASCADE
    )`.execute(db);
  await sql`CREATE INDEX agent_delegates_delegate_idx ON agent_delegates (delegate_agent_id)`.execute(db);
}
