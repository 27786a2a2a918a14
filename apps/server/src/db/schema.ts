// Kysely types for every table. Each domain declares its tables in its own
// `<domain>.tables.ts` and they are combined here.
import type { AccountExportsTables } from '../account-exports/account-exports.tables.ts';
import type { AccountsTables } from '../accounts/accounts.tables.ts';
import type { AgentsTables } from '../agents/agents.tables.ts';
import type { AuditTables } from '../audit/audit.tables.ts';
import type { BillingTables } from '../billing/billing.tables.ts';
import type { ConversationsTables } from '../conversations/conversations.tables.ts';
import type { ChangesTables } from '../conversations/work/changes.tables.ts';
import type { PushTables } from '../conversations/work/push.tables.ts';
import type { EnvironmentsTables } from '../environments/environments.tables.ts';
import type { InferenceCredentialsTables } from '../inference-credentials/inference-credentials.tables.ts';
import type { SecretsTables } from '../secrets/secrets.tables.ts';
import type { UsageTables } from '../usage/usage.tables.ts';
import type { VaultsTables } from '../vaults/vaults.tables.ts';

export interface PaddockMigrationsTable {
  name: string;
  applied_at: Date;
}

export interface Database
  extends AccountsTables,
    AuditTables,
    SecretsTables,
    EnvironmentsTables,
    VaultsTables,
    AgentsTables,
    ConversationsTables,
    ChangesTables,
    InferenceCredentialsTables,
    UsageTables,
    AccountExportsTables,
    BillingTables,
    PushTables {
  paddock_migrations: PaddockMigrationsTable;
}
