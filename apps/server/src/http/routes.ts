// Every route module of the service, registered in one place.
import type { FastifyInstance } from 'fastify';
import { accountExportsRoutes } from '../account-exports/account-exports.routes.ts';
import { accountDeletionRoutes } from '../accounts/account-deletion.routes.ts';
import { accountsRoutes } from '../accounts/accounts.routes.ts';
import { adminRoutes } from '../accounts/admin.routes.ts';
import { adminViewsRoutes } from '../admin/admin.routes.ts';
import { agentsRoutes } from '../agents/agents.routes.ts';
import { applyRoutes } from '../apply/apply.routes.ts';
import { auditRoutes } from '../audit/audit.routes.ts';
import { apiKeysRoutes } from '../auth/api-keys.routes.ts';
import { oauthRoutes } from '../auth/oauth.routes.ts';
import { billingAdminRoutes } from '../billing/admin.routes.ts';
import { billingRoutes } from '../billing/billing.routes.ts';
import { billingWebhookRoutes } from '../billing/webhook.routes.ts';
import { conversationsRoutes } from '../conversations/api/conversations.routes.ts';
import { streamRoutes } from '../conversations/api/stream.routes.ts';
import { changesRoutes } from '../conversations/work/changes.routes.ts';
import { filesRoutes } from '../conversations/work/files.routes.ts';
import { pushRoutes } from '../conversations/work/push.routes.ts';
import { terminalRoutes } from '../conversations/work/terminal.routes.ts';
import type { Deps } from '../deps.ts';
import { environmentsRoutes } from '../environments/environments.routes.ts';
import { inferenceCredentialsRoutes } from '../inference-credentials/inference-credentials.routes.ts';
import { siteRoutes } from '../site/site.routes.ts';
import { usageRoutes } from '../usage/usage.routes.ts';
import { vaultsRoutes } from '../vaults/vaults.routes.ts';
import { healthRoutes } from './routes/health.routes.ts';
import { openapiRoutes } from './routes/openapi.routes.ts';

export async function registerRoutes(app: FastifyInstance, deps: Deps): Promise<void> {
  await app.register(healthRoutes(deps));
  await app.register(openapiRoutes(deps));
  await app.register(accountsRoutes(deps));
  await app.register(apiKeysRoutes(deps));
  await app.register(accountExportsRoutes(deps));
  await app.register(inferenceCredentialsRoutes(deps));
  await app.register(oauthRoutes(deps));
  await app.register(adminRoutes(deps));
  await app.register(accountDeletionRoutes(deps));
  await app.register(adminViewsRoutes(deps));
  await app.register(auditRoutes(deps));
  await app.register(usageRoutes(deps));
  // Only with BILLING_ENABLED: off, no billing path exists at all.
  if (deps.billing) await app.register(billingRoutes({ accounts: deps.accounts, billing: deps.billing }));
  await app.register(environmentsRoutes(deps));
  await app.register(vaultsRoutes(deps));
  await app.register(agentsRoutes(deps));
  await app.register(applyRoutes(deps));
  await app.register(
    conversationsRoutes({
      conversations: deps.conversations,
      sandboxKey: deps.sandboxKey,
      onClose: () => deps.conversationEngine.stop(),
    }),
  );
  await app.register(streamRoutes(deps));
  await app.register(pushRoutes(deps));
  await app.register(changesRoutes(deps));
  await app.register(filesRoutes(deps));
  await app.register(terminalRoutes(deps));
  await app.register(siteRoutes(deps));
  // Billing (docs/billing.md): no billing route exists unless BILLING_ENABLED.
  if (deps.config.billing.enabled) {
    await app.register(billingWebhookRoutes(deps));
    await app.register(billingAdminRoutes(deps));
  }
}
