// The secrets sub-resource shared by environments and vaults: the owner must exist in the
// caller's tenant (a foreign owner id is "not found"), every write is audited with the key
// name only, and values are never returned.
import type { AuditService } from '../audit/audit.service.ts';
import type { Db } from '../db/database.ts';
import { AppError } from '../http/errors.ts';
import { isForeignKeyViolation, type ResourceContext } from '../resources/context.ts';
import { envVarNameProblem, isUuid } from '../resources/fields.ts';
import type { SecretMeta, SecretOutcome, SecretOwner, SecretsService } from './secrets.service.ts';

export interface OwnedSecrets {
  list(ctx: ResourceContext, ownerId: string): Promise<SecretMeta[]>;
  upsert(
    ctx: ResourceContext,
    ownerId: string,
    key: string,
    value: string,
  ): Promise<{ secret: SecretMeta; outcome: SecretOutcome }>;
  remove(ctx: ResourceContext, ownerId: string, key: string): Promise<void>;
}

export function createOwnedSecrets(deps: {
  db: Db;
  kind: SecretOwner['kind'];
  secrets: SecretsService;
  audit: Pick<AuditService, 'record'>;
  ownerExists(db: Db, tenantId: string, id: string): Promise<boolean>;
}): OwnedSecrets {
  const what = deps.kind;
  const owner = async (db: Db, ctx: ResourceContext, id: string): Promise<SecretOwner> => {
    if (!isUuid(id) || !(await deps.ownerExists(db, ctx.tenantId, id))) throw AppError.notFound(what);
    return { kind: deps.kind, id };
  };
  const idField = `${deps.kind}_id`;

  return {
    async list(ctx, ownerId) {
      return await deps.secrets.list(ctx.tenantId, await owner(deps.db, ctx, ownerId));
    },

    async upsert(ctx, ownerId, key, value) {
      // An owner deleted between the existence check and the insert fails the foreign
      // key: to the caller that is the same "not found" as an owner that never existed.
      const notFoundOnRace = (err: unknown) => {
        throw isForeignKeyViolation(err) ? AppError.notFound(what) : err;
      };
      return await deps.db
        .transaction()
        .execute(async (trx) => {
          const o = await owner(trx, ctx, ownerId);
          const result = await deps.secrets.upsert(ctx.tenantId, o, key, value, trx);
          if (result.outcome !== 'unchanged') {
            await deps.audit.record(
              {
                type: `${what}.secret.upserted`,
                tenantId: ctx.tenantId,
                actor: ctx.actor,
                ip: ctx.ip,
                metadata: { [idField]: ownerId, key, outcome: result.outcome },
              },
              trx,
            );
          }
          return result;
        })
        .catch(notFoundOnRace);
    },

    async remove(ctx, ownerId, key) {
      await deps.db.transaction().execute(async (trx) => {
        const o = await owner(trx, ctx, ownerId);
        if (envVarNameProblem(key) !== null || !(await deps.secrets.remove(ctx.tenantId, o, key, trx))) {
          throw AppError.notFound('secret');
        }
        await deps.audit.record(
          {
            type: `${what}.secret.deleted`,
            tenantId: ctx.tenantId,
            actor: ctx.actor,
            ip: ctx.ip,
            metadata: { [idField]: ownerId, key },
          },
          trx,
        );
      });
    },
  };
}
