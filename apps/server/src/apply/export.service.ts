// The account's resources as manifest documents (the file form the CLI reads and `POST
// /api/apply` accepts once compiled), for the console's export and for backups.
//
// What must hold (test/apply.export.test.ts):
//   - no secret value leaves the server: a secret appears as its key with the placeholder
//     `${env:KEY}`, which the CLI resolves from its environment on apply and the console asks
//     for (or leaves the stored value as it is);
//   - exporting, then applying the export, reports every resource "unchanged": the spec holds
//     every mutable field as stored, the agent's environment and vaults by name.
import type { AgentsService } from '../agents/agents.service.ts';
import type { EnvironmentsService } from '../environments/environments.service.ts';
import type { ResourceContext } from '../resources/context.ts';
import type { SecretsService } from '../secrets/secrets.service.ts';
import type { VaultsService } from '../vaults/vaults.service.ts';

export const MANIFEST_API_VERSION = 'paddock/v1';

export interface ManifestDocument {
  apiVersion: typeof MANIFEST_API_VERSION;
  kind: 'Environment' | 'Vault' | 'Agent';
  metadata: { name: string };
  spec: Record<string, unknown>;
}

export interface ExportService {
  export(ctx: ResourceContext): Promise<{ documents: ManifestDocument[] }>;
}

/** The placeholder an exported secret carries instead of its value. */
export const secretPlaceholder = (key: string): string => `\${env:${key}}`;

export function createExportService(deps: {
  secrets: Pick<SecretsService, 'list'>;
  environments: Pick<EnvironmentsService, 'list'>;
  vaults: Pick<VaultsService, 'list'>;
  agents: Pick<AgentsService, 'list'>;
}): ExportService {
  const secretsOf = async (ctx: ResourceContext, kind: 'environment' | 'vault', id: string) => {
    const keys = await deps.secrets.list(ctx.tenantId, { kind, id });
    return keys.map((s) => ({ key: s.key, value: secretPlaceholder(s.key) }));
  };
  return {
    async export(ctx) {
      const [environments, vaults, agents] = await Promise.all([
        deps.environments.list(ctx),
        deps.vaults.list(ctx),
        deps.agents.list(ctx, {}),
      ]);
      const documents: ManifestDocument[] = [];
      const doc = (kind: ManifestDocument['kind'], name: string, spec: Record<string, unknown>) =>
        documents.push({ apiVersion: MANIFEST_API_VERSION, kind, metadata: { name }, spec });
      for (const e of environments) {
        const secrets = await secretsOf(ctx, 'environment', e.id);
        doc('Environment', e.name, {
          env_vars: e.env_vars,
          packages: e.packages,
          repos: e.repos,
          setup_script: e.setup_script,
          networking_type: e.networking_type,
          networking_config: e.networking_config,
          metadata: e.metadata,
          ...(secrets.length > 0 ? { secrets } : {}),
        });
      }
      const vaultNames = new Map(vaults.map((v) => [v.id, v.name]));
      for (const v of vaults) {
        const secrets = await secretsOf(ctx, 'vault', v.id);
        doc('Vault', v.name, { metadata: v.metadata, ...(secrets.length > 0 ? { secrets } : {}) });
      }
      const environmentNames = new Map(environments.map((e) => [e.id, e.name]));
      for (const a of agents) {
        doc('Agent', a.name, {
          model: a.model,
          runtime: a.runtime,
          environment: a.environment_id ? (environmentNames.get(a.environment_id) ?? null) : null,
          vaults: a.vault_ids.flatMap((id) => vaultNames.get(id) ?? []),
          system: a.system,
          description: a.description,
          skills: a.skills,
          mcp_servers: a.mcp_servers,
          metadata: a.metadata,
        });
      }
      return { documents };
    },
  };
}
