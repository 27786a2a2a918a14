import type { ColumnType } from 'kysely';

type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;
type Json<T> = ColumnType<T, string, string>;

export type Runtime = 'claude' | 'codex' | 'gemini' | 'opencode';

/** Inline `{name, content}` or source-based `{source, ref}` (validated by agents.schema.ts). */
export interface Skill {
  name?: string;
  content?: string;
  source?: string;
  ref?: string;
}

export interface McpServer {
  command: string;
  args: string[];
  env: Record<string, string>;
}

export interface AgentsTable {
  id: string;
  tenant_id: string;
  name: string;
  model: string;
  runtime: Runtime;
  environment_id: string | null;
  system: string | null;
  description: string | null;
  skills: Json<Skill[]>;
  mcp_servers: Json<Record<string, McpServer>>;
  metadata: Json<Record<string, unknown>>;
  created_at: Timestamp;
  updated_at: Timestamp;
}

export interface AgentVaultsTable {
  tenant_id: string;
  agent_id: string;
  vault_id: string;
}

/** Agents a sandbox of this agent's conversations may start sub-conversations on (sandbox-key.ts). */
export interface AgentDelegatesTable {
  tenant_id: string;
  agent_id: string;
  delegate_agent_id: string;
}

export interface AgentsTables {
  agents: AgentsTable;
  agent_vaults: AgentVaultsTable;
  agent_delegates: AgentDelegatesTable;
}
