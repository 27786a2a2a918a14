// Tenant data keys and encrypted secrets. Invariants: ./INVARIANTS.md.
// Values pass through here in memory only; nothing in this file logs, audits or returns a
// secret value except decryptOwner/mergedEnv, whose callers hand them to a sandbox.
import { v7 as uuidv7 } from 'uuid';
import type { AuditService } from '../audit/audit.service.ts';
import type { Db } from '../db/database.ts';
import { AppError } from '../http/errors.ts';
import type { Logger } from '../observability/logger.ts';
import {
  type ConversationBlobBinding,
  DecryptionError,
  decryptSecret,
  encryptSecret,
  generateDataKey,
  type InferenceCredentialBinding,
  macEquals,
  masterKeyId,
  openConversationBlob,
  openInferenceCredential,
  type SecretBinding,
  sealConversationBlob,
  sealInferenceCredential,
  secretValueMac,
  unwrapDataKey,
  wrapDataKey,
} from './envelope.ts';
import {
  countSecrets,
  deleteSecret,
  findSecret,
  findTenantKey,
  insertTenantKeyIfMissing,
  listSecrets,
  listStaleTenantKeys,
  listTenantKeys,
  listTenantSecrets,
  type SecretOwner,
  updateTenantKey,
  upsertSecret,
} from './secrets.repo.ts';

export type { SecretOwner } from './secrets.repo.ts';

export interface SecretMeta {
  id: string;
  key: string;
  created_at: string;
  updated_at: string;
}

export type SecretOutcome = 'created' | 'updated' | 'unchanged';

export interface RotationReport {
  /** Keys rewrapped from the previous master key to the current one. */
  rewrapped: number;
  /** Keys wrapped by neither the current nor the previous master key: left untouched. */
  unmatched: number;
}

export interface VerificationReport {
  /** Tenant keys that unwrap under a configured master key. */
  tenants: number;
  /** Tenant keys wrapped by no configured master key, or failing authentication under it. */
  tenantsUnreadable: number;
  /** Secrets that decrypt and authenticate under their tenant key. */
  secrets: number;
  /** Secrets that do not (their tenant key is unreadable, or the ciphertext fails authentication). */
  secretsUnreadable: number;
}

export interface SecretsService {
  /** Creates the tenant's data key if it has none. Idempotent and race-safe. */
  ensureTenantKey(tenantId: string, db?: Db): Promise<void>;
  list(tenantId: string, owner: SecretOwner, db?: Db): Promise<SecretMeta[]>;
  count(
    tenantId: string,
    kind: SecretOwner['kind'],
    ownerIds: readonly string[],
    db?: Db,
  ): Promise<Map<string, number>>;
  /** Encrypts and stores one value. "unchanged" when the stored value is identical (keyed MAC). */
  upsert(
    tenantId: string,
    owner: SecretOwner,
    key: string,
    value: string,
    db?: Db,
  ): Promise<{ secret: SecretMeta; outcome: SecretOutcome }>;
  remove(tenantId: string, owner: SecretOwner, key: string, db?: Db): Promise<boolean>;
  /** Every secret of one owner, decrypted. For the conversation engine only. */
  decryptOwner(tenantId: string, owner: SecretOwner, db?: Db): Promise<Record<string, string>>;
  /**
   * The env map a sandbox receives: environment env_vars, then environment secrets, then
   * vault secrets (later layers win on a key collision).
   */
  mergedEnv(
    tenantId: string,
    layers: { envVars?: Record<string, string>; environmentId?: string | null; vaultId?: string | null },
    db?: Db,
  ): Promise<Record<string, string>>;
  /** Seals a conversation's blob (runtime session state) with the tenant key. */
  sealBlob(binding: ConversationBlobBinding, plaintext: Buffer, db?: Db): Promise<Buffer>;
  /** Opens a sealed blob; DecryptionError when it was tampered with or belongs elsewhere. */
  openBlob(binding: ConversationBlobBinding, sealed: Buffer, db?: Db): Promise<Buffer>;
  /** Seals an account's inference credential (its API key) with the tenant key. */
  sealCredential(binding: InferenceCredentialBinding, value: string, db?: Db): Promise<Buffer>;
  /** Opens sealed inference credentials of one tenant (one key unwrap for all): each row plus its `value`. */
  openCredentials<T extends { provider: string; ciphertext: Buffer }>(
    tenantId: string,
    sealed: readonly T[],
    db?: Db,
  ): Promise<(T & { value: string })[]>;
  /** Rewraps every tenant key wrapped by the previous master key with the current one. */
  rotateMasterKey(options?: {
    batchSize?: number;
    onBatch?: (done: RotationReport) => void;
  }): Promise<RotationReport>;
  /**
   * Unwraps every tenant key and decrypts every secret, reading only (`task verify-secrets`,
   * the restore drill): the values are decrypted in memory and dropped.
   */
  verifyAll(options?: {
    batchSize?: number;
    onBatch?: (done: VerificationReport) => void;
  }): Promise<VerificationReport>;
}

export interface SecretsDeps {
  db: Db;
  logger: Logger;
  masterKey: Buffer;
  previousMasterKey?: Buffer | undefined;
  audit: Pick<AuditService, 'record'>;
}

function toMeta(row: { id: string; key: string; created_at: Date; updated_at: Date }): SecretMeta {
  return {
    id: row.id,
    key: row.key,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

export function createSecretsService(deps: SecretsDeps): SecretsService {
  const currentId = masterKeyId(deps.masterKey);
  const previousId = deps.previousMasterKey ? masterKeyId(deps.previousMasterKey) : null;

  const masterFor = (version: string): Buffer | null => {
    if (version === currentId) return deps.masterKey;
    if (previousId !== null && version === previousId && deps.previousMasterKey)
      return deps.previousMasterKey;
    return null;
  };

  const unavailable = (tenantId: string, storedVersion: string, reason: string): AppError => {
    // Fingerprints only: they identify a key without revealing it.
    deps.logger.error(
      {
        tenantId,
        storedKeyVersion: storedVersion,
        currentKeyVersion: currentId,
        previousKeyVersion: previousId,
      },
      `tenant data key cannot be unwrapped: ${reason}`,
    );
    return new AppError(
      'service_unavailable',
      'secrets are unavailable: the server MASTER_SECRETS_KEY does not match the key that protects this account (see docs/secrets.md)',
    );
  };

  const ensureTenantKey = async (tenantId: string, db: Db = deps.db): Promise<void> => {
    if (await findTenantKey(db, tenantId)) return;
    await insertTenantKeyIfMissing(
      db,
      tenantId,
      wrapDataKey(deps.masterKey, tenantId, generateDataKey()),
      currentId,
    );
  };

  const dataKey = async (tenantId: string, db: Db = deps.db): Promise<Buffer> => {
    let row = await findTenantKey(db, tenantId);
    if (!row) {
      await ensureTenantKey(tenantId, db);
      row = await findTenantKey(db, tenantId);
    }
    if (!row) throw new Error('tenant key vanished after insert');
    const master = masterFor(row.key_version);
    if (!master)
      throw unavailable(tenantId, row.key_version, 'it was wrapped by a master key that is not configured');
    try {
      return unwrapDataKey(master, tenantId, row.wrapped_key);
    } catch (err) {
      if (err instanceof DecryptionError)
        throw unavailable(tenantId, row.key_version, 'authentication failed');
      throw err;
    }
  };

  const binding = (tenantId: string, owner: SecretOwner, key: string): SecretBinding => ({
    tenantId,
    ownerKind: owner.kind,
    ownerId: owner.id,
    key,
  });

  const decryptOwner = async (tenantId: string, owner: SecretOwner, db: Db = deps.db) => {
    const rows = await listSecrets(db, tenantId, owner);
    if (rows.length === 0) return {};
    const dek = await dataKey(tenantId, db);
    const out: Record<string, string> = {};
    for (const row of rows)
      out[row.key] = decryptSecret(dek, binding(tenantId, owner, row.key), row.ciphertext);
    return out;
  };

  return {
    ensureTenantKey,

    async list(tenantId, owner, db = deps.db) {
      return (await listSecrets(db, tenantId, owner)).map(toMeta);
    },

    async count(tenantId, kind, ownerIds, db = deps.db) {
      return await countSecrets(db, tenantId, kind, ownerIds);
    },

    async upsert(tenantId, owner, key, value, db = deps.db) {
      const dek = await dataKey(tenantId, db);
      const b = binding(tenantId, owner, key);
      const mac = secretValueMac(dek, b, value);
      const existing = await findSecret(db, tenantId, owner, key);
      if (existing && macEquals(existing.value_mac, mac)) {
        return { secret: toMeta(existing), outcome: 'unchanged' };
      }
      const { row, inserted } = await upsertSecret(db, tenantId, owner, {
        id: uuidv7(),
        key,
        ciphertext: encryptSecret(dek, b, value),
        value_mac: mac,
      });
      return { secret: toMeta(row), outcome: inserted ? 'created' : 'updated' };
    },

    async remove(tenantId, owner, key, db = deps.db) {
      return await deleteSecret(db, tenantId, owner, key);
    },

    decryptOwner,

    async sealBlob(b, plaintext, db = deps.db) {
      return sealConversationBlob(await dataKey(b.tenantId, db), b, plaintext);
    },

    async openBlob(b, sealed, db = deps.db) {
      return openConversationBlob(await dataKey(b.tenantId, db), b, sealed);
    },

    async sealCredential(b, value, db = deps.db) {
      return sealInferenceCredential(await dataKey(b.tenantId, db), b, value);
    },

    async openCredentials(tenantId, sealed, db = deps.db) {
      if (sealed.length === 0) return [];
      const dek = await dataKey(tenantId, db);
      return sealed.map((row) => ({
        ...row,
        value: openInferenceCredential(dek, { tenantId, provider: row.provider }, row.ciphertext),
      }));
    },

    async mergedEnv(tenantId, layers, db = deps.db) {
      const env: Record<string, string> = { ...(layers.envVars ?? {}) };
      if (layers.environmentId) {
        Object.assign(
          env,
          await decryptOwner(tenantId, { kind: 'environment', id: layers.environmentId }, db),
        );
      }
      if (layers.vaultId) {
        Object.assign(env, await decryptOwner(tenantId, { kind: 'vault', id: layers.vaultId }, db));
      }
      return env;
    },

    async rotateMasterKey(options = {}) {
      const batchSize = options.batchSize ?? 100;
      const report: RotationReport = { rewrapped: 0, unmatched: 0 };
      let after: string | null = null;
      for (;;) {
        const batch = await listStaleTenantKeys(deps.db, currentId, after, batchSize);
        if (batch.length === 0) break;
        for (const tenantId of batch) {
          // One transaction per tenant: the row is locked, re-read and rewritten together.
          await deps.db.transaction().execute(async (trx) => {
            const row = await findTenantKey(trx, tenantId, true);
            if (!row || row.key_version === currentId) return;
            const previous =
              previousId !== null && row.key_version === previousId ? deps.previousMasterKey : undefined;
            if (!previous) {
              report.unmatched += 1;
              deps.logger.error(
                { tenantId, storedKeyVersion: row.key_version },
                'tenant key is wrapped by an unknown master key: left untouched',
              );
              return;
            }
            let dek: Buffer;
            try {
              dek = unwrapDataKey(previous, tenantId, row.wrapped_key);
            } catch (err) {
              if (!(err instanceof DecryptionError)) throw err;
              report.unmatched += 1;
              deps.logger.error(
                { tenantId },
                'tenant key failed authentication under the previous master key',
              );
              return;
            }
            await updateTenantKey(trx, tenantId, wrapDataKey(deps.masterKey, tenantId, dek), currentId);
            await deps.audit.record(
              {
                type: 'tenant_key.rotated',
                tenantId,
                actor: { kind: 'system' },
                metadata: { from_version: row.key_version, to_version: currentId },
              },
              trx,
            );
            report.rewrapped += 1;
          });
        }
        after = batch.at(-1) ?? null;
        options.onBatch?.({ ...report });
      }
      return report;
    },

    async verifyAll(options = {}) {
      const batchSize = options.batchSize ?? 100;
      const report: VerificationReport = {
        tenants: 0,
        tenantsUnreadable: 0,
        secrets: 0,
        secretsUnreadable: 0,
      };
      let after: string | null = null;
      for (;;) {
        const batch = await listTenantKeys(deps.db, after, batchSize);
        if (batch.length === 0) break;
        for (const row of batch) {
          const tenantId = row.tenant_id;
          const rows = await listTenantSecrets(deps.db, tenantId);
          const master = masterFor(row.key_version);
          let dek: Buffer | null = null;
          if (master) {
            try {
              dek = unwrapDataKey(master, tenantId, row.wrapped_key);
            } catch (err) {
              if (!(err instanceof DecryptionError)) throw err;
            }
          }
          if (!dek) {
            report.tenantsUnreadable += 1;
            report.secretsUnreadable += rows.length;
            // Fingerprints only, as everywhere: they identify a key without revealing it.
            deps.logger.error(
              {
                tenantId,
                storedKeyVersion: row.key_version,
                currentKeyVersion: currentId,
                previousKeyVersion: previousId,
              },
              master
                ? 'tenant key failed authentication under the master key its fingerprint names'
                : 'tenant key is wrapped by a master key that is not configured',
            );
            continue;
          }
          report.tenants += 1;
          for (const secret of rows) {
            const owner: SecretOwner = secret.environment_id
              ? { kind: 'environment', id: secret.environment_id }
              : { kind: 'vault', id: secret.vault_id ?? '' };
            try {
              decryptSecret(dek, binding(tenantId, owner, secret.key), secret.ciphertext);
              report.secrets += 1;
            } catch (err) {
              if (!(err instanceof DecryptionError)) throw err;
              report.secretsUnreadable += 1;
              deps.logger.error(
                { tenantId, ownerKind: owner.kind, ownerId: owner.id, key: secret.key },
                'secret failed authentication under its tenant key',
              );
            }
          }
        }
        after = batch.at(-1)?.tenant_id ?? null;
        options.onBatch?.({ ...report });
      }
      return report;
    },
  };
}
