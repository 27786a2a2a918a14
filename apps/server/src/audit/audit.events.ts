// The audit allowlist. Every event type written to the audit log must be listed here;
// AuditService.record rejects anything else (error-level log, paddock_audit_rejected_total,
// and a thrown AuditTypeRejectedError). Add your domain's types in its own block.
export const AUDIT_EVENT_TYPES: Set<string> = new Set([
  // Accounts and authentication
  'user.registered',
  'user.email_verified',
  'user.email_change_requested',
  'user.email_changed',
  'user.password_changed',
  'user.password_reset_requested',
  'user.password_reset',
  // The one record an account's deletion keeps (accounts/account-deletion.ts): how, and counts.
  'user.deleted',
  'auth.login.succeeded',
  'auth.login.failed',
  'auth.logout',
  'auth.sessions.ended',
  'auth.oauth.linked',
  'api_key.created',
  'api_key.revoked',
  // Admin actions
  'admin.role.granted',
  'admin.user.suspended',
  'admin.user.unsuspended',
  'admin.user.password_reset_sent',
  'admin.user.password_set',
  'admin.user.deleted',
  'admin.users.listed',
  'admin.audit.read',
  'admin.user.read',
  'admin.conversations.listed',
  'admin.conversation.read',
  'admin.usage.read',
  'admin.billing.read',
  // Resources (environments, vaults, agents, secrets, bulk apply). Metadata carries names and
  // ids, never a secret value.
  'environment.created',
  'environment.updated',
  'environment.deleted',
  'environment.secret.upserted',
  'environment.secret.deleted',
  'vault.created',
  'vault.updated',
  'vault.deleted',
  'vault.secret.upserted',
  'vault.secret.deleted',
  'agent.created',
  'agent.updated',
  'agent.deleted',
  'apply.completed',
  'tenant_key.rotated',
  // Inference credentials (per account). Metadata: provider, outcome, base_url_set; never a key.
  'inference_credential.set',
  'inference_credential.deleted',
  // Data exports (per account). Metadata: the export id, and size on download.
  'account.export_requested',
  'account.export_downloaded',
  // Billing (billing/billing.service.ts, legacy-trials.task.ts). Metadata: ids and flags, never a key.
  'billing.checkout_started',
  'billing.cancel_at_period_end_set',
  'billing.legacy_trial_started',
  // The agent's work out of the sandbox (conversations/work/). Metadata: the conversation, the
  // repository's directory and remote (origin and path), the branch and commit; for a pull
  // request the provider, its number and URL. Never a token or a commit message.
  'conversation.pushed',
  'conversation.pull_request.opened',
  // The agent's work out of the sandbox (conversations/work/). Metadata: the conversation and
  // sandbox, the terminal's size, its exit code and seconds open; never a byte of the session.
  'conversation.terminal.opened',
  'conversation.terminal.closed',
]);
