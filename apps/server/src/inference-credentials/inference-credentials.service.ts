// Per-account inference provider credentials (issue 10, item 4).
//
// Invariants (tests: test/inference-credentials.http.test.ts unless named otherwise):
// - Write-only: no method returns a key except forSandbox, whose callers register each key with
//   a redactor before anything goes anywhere: the provisioner, with the conversation's before the
//   env is written (env-file.ts), and the changes, files and terminal routes, with the request's
//   before a diff, a file or terminal output is answered (conversations/work/changes.ts,
//   files-access.ts); none ever returns a key. Audit rows carry the provider and whether a base URL is set, never a value.
// - The key is sealed under the tenant data key, bound to tenant and provider
//   (secrets/INVARIANTS.md 4): a ciphertext moved to another account or provider fails.
// - Tenant = account: every query is scoped by the caller's tenant id; there is no way to name
//   another account's credential.
// - A base URL no sandbox can reach (reach.ts) is refused with a 422 on base_url that says
//   what the operator declares; nothing is stored (test/inference-credentials.reach.http.test.ts).
// - Idempotent delete: deleting a credential that is not set is a 204 and writes no audit row.
import type { AuditService } from '../audit/audit.service.ts';
import type { Db } from '../db/database.ts';
import { AppError } from '../http/errors.ts';
import type { ResourceContext } from '../resources/context.ts';
import type { SecretsService } from '../secrets/secrets.service.ts';
import {
  type CredentialMetaRow,
  deleteCredential,
  listCredentialMeta,
  listCredentials,
  upsertCredential,
} from './inference-credentials.repo.ts';
import type { InferenceCredentialInput, InferenceCredentialViewT } from './inference-credentials.schema.ts';
import { INFERENCE_PROVIDERS, type InferenceProvider, isInferenceProvider } from './providers.ts';
import type { GatewayReach } from './reach.ts';

/** A decrypted credential, for the sandbox env only. */
export interface SandboxCredential {
  provider: InferenceProvider;
  apiKey: string;
  baseUrl: string | null;
}

export interface InferenceCredentialsService {
  /** All three providers, set or not, in a fixed order. */
  list(ctx: ResourceContext): Promise<InferenceCredentialViewT[]>;
  set(
    ctx: ResourceContext,
    provider: string,
    input: InferenceCredentialInput,
  ): Promise<{ credential: InferenceCredentialViewT; outcome: 'created' | 'updated' }>;
  remove(ctx: ResourceContext, provider: string): Promise<void>;
  /** The account's credentials, decrypted, for the sandbox env of its conversations. */
  forSandbox(tenantId: string, db?: Db): Promise<SandboxCredential[]>;
}

export interface InferenceCredentialsDeps {
  db: Db;
  secrets: Pick<SecretsService, 'sealCredential' | 'openCredentials'>;
  audit: Pick<AuditService, 'record'>;
  /** Refuses a base URL no sandbox can reach (reach.ts). */
  reach: GatewayReach;
}

function providerOf(raw: string): InferenceProvider {
  if (!isInferenceProvider(raw))
    throw new AppError(
      'not_found',
      `unknown inference provider: the providers are ${INFERENCE_PROVIDERS.join(', ')}`,
    );
  return raw;
}

function view(provider: InferenceProvider, row: CredentialMetaRow | undefined): InferenceCredentialViewT {
  return {
    provider,
    set: row !== undefined,
    base_url: row?.base_url ?? null,
    updated_at: row ? row.updated_at.toISOString() : null,
  };
}

export function createInferenceCredentialsService(
  deps: InferenceCredentialsDeps,
): InferenceCredentialsService {
  return {
    async list(ctx) {
      const rows = new Map((await listCredentialMeta(deps.db, ctx.tenantId)).map((r) => [r.provider, r]));
      return INFERENCE_PROVIDERS.map((p) => view(p, rows.get(p)));
    },

    async set(ctx, rawProvider, input) {
      const provider = providerOf(rawProvider);
      const baseUrl = input.base_url ?? null;
      const unreachable = baseUrl === null ? null : await deps.reach.problem(baseUrl);
      if (unreachable) throw AppError.validation({ base_url: [unreachable] });
      return await deps.db.transaction().execute(async (trx) => {
        const ciphertext = await deps.secrets.sealCredential(
          { tenantId: ctx.tenantId, provider },
          input.api_key,
          trx,
        );
        const { row, inserted } = await upsertCredential(trx, ctx.tenantId, {
          provider,
          ciphertext,
          base_url: baseUrl,
        });
        const outcome = inserted ? 'created' : 'updated';
        await deps.audit.record(
          {
            type: 'inference_credential.set',
            tenantId: ctx.tenantId,
            actor: ctx.actor,
            ip: ctx.ip,
            metadata: { provider, outcome, base_url_set: baseUrl !== null },
          },
          trx,
        );
        return { credential: view(provider, row), outcome };
      });
    },

    async remove(ctx, rawProvider) {
      const provider = providerOf(rawProvider);
      await deps.db.transaction().execute(async (trx) => {
        if (!(await deleteCredential(trx, ctx.tenantId, provider))) return;
        await deps.audit.record(
          {
            type: 'inference_credential.deleted',
            tenantId: ctx.tenantId,
            actor: ctx.actor,
            ip: ctx.ip,
            metadata: { provider },
          },
          trx,
        );
      });
    },

    async forSandbox(tenantId, db = deps.db) {
      const opened = await deps.secrets.openCredentials(tenantId, await listCredentials(db, tenantId), db);
      return opened.map((r) => ({ provider: r.provider, apiKey: r.value, baseUrl: r.base_url }));
    },
  };
}
