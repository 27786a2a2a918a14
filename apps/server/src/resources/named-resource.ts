// The CRUD core shared by the named, tenant-scoped resources (environments, vaults, agents):
// find-or-404, audited create/update/delete in one transaction, the unique-name → 409 mapping
// and the upsert-by-name used by bulk apply. Each domain passes its repo functions, its names
// and its audit event types; reads with extra shape (list filters, counts) stay in the domain.
// What must hold:
// - Tenant scoping: every lookup takes the caller's tenant id; a malformed or foreign id is
//   "not found", never a 400 or a 403.
// - Every change is audited in the transaction that makes it, so an audit failure rolls the
//   change back.
// - A delete counts only when its DELETE removed the row: of concurrent deletes of one row
//   exactly one succeeds and is audited, the rest are "not found"
//   (api-hardening.races.test.ts).
// - Create, update and upsert-by-name (bulk apply) map database errors the same way, so a
//   race never surfaces as an internal error.
import { v7 as uuidv7 } from 'uuid';
import type { AuditService } from '../audit/audit.service.ts';
import type { Db } from '../db/database.ts';
import { AppError } from '../http/errors.ts';
import { isUniqueViolation, type ResourceContext } from './context.ts';
import { isUuid } from './fields.ts';

export type UpsertAction = 'created' | 'updated' | 'unchanged';

interface NamedRow {
  id: string;
  name: string;
}

export interface NamedResourceSpec<Row extends NamedRow, Input extends { name: string }, View> {
  db: Db;
  audit: Pick<AuditService, 'record'>;
  /** As in "environment not found". */
  noun: string;
  /** The unique (tenant_id, name) constraint, and the 409 message when it is violated. */
  nameConstraint: string;
  nameTaken: string;
  /** Audit event types (audit.events.ts) and the metadata key that carries the row id. */
  events: { created: string; updated: string; deleted: string; idKey: string };
  find(conn: Db, tenantId: string, id: string): Promise<Row | undefined>;
  findByName(conn: Db, tenantId: string, name: string): Promise<Row | undefined>;
  /** The row with its dependent writes (allowlists, tenant key); runs before the audit record. */
  insert(conn: Db, tenantId: string, id: string, input: Input): Promise<Row>;
  /** Undefined when no row of the tenant has this id. */
  update(conn: Db, tenantId: string, id: string, input: Input): Promise<Row | undefined>;
  /** False when no row was deleted (a concurrent delete got there first). */
  delete(conn: Db, tenantId: string, id: string): Promise<boolean>;
  /** Refuses a delete (by throwing) while something still depends on the row. */
  beforeDelete?(conn: Db, tenantId: string, row: Row): Promise<void>;
  views(conn: Db, tenantId: string, rows: Row[]): Promise<View[]>;
  /** Bulk apply leaves a row alone when its stored fields already equal the input. */
  unchanged(conn: Db, tenantId: string, row: Row, input: Input): boolean | Promise<boolean>;
  /** Canonical form of an input (ids lower-cased, sets sorted) before it is written or compared. */
  normalize?(input: Input): Input;
  /** Database errors of a create or update other than the name conflict; undefined to rethrow. */
  mapError?(err: unknown): AppError | undefined;
}

export interface NamedResource<Input, View> {
  get(ctx: ResourceContext, id: string): Promise<View>;
  create(ctx: ResourceContext, input: Input): Promise<View>;
  update(ctx: ResourceContext, id: string, input: Input): Promise<View>;
  remove(ctx: ResourceContext, id: string): Promise<void>;
  upsertByName(ctx: ResourceContext, input: Input, trx: Db): Promise<{ id: string; action: UpsertAction }>;
}

export function createNamedResource<Row extends NamedRow, Input extends { name: string }, View>(
  spec: NamedResourceSpec<Row, Input, View>,
): NamedResource<Input, View> {
  const { db, events } = spec;
  const normalize = spec.normalize ?? ((input: Input) => input);

  const view = async (conn: Db, tenantId: string, row: Row) => (await spec.views(conn, tenantId, [row]))[0]!;

  /** The tenant's row, or 404 (also for a malformed id). */
  const find = async (conn: Db, tenantId: string, id: string): Promise<Row> => {
    const row = isUuid(id) ? await spec.find(conn, tenantId, id) : undefined;
    if (!row) throw AppError.notFound(spec.noun);
    return row;
  };

  const record = (conn: Db, ctx: ResourceContext, type: string, row: NamedRow) =>
    spec.audit.record(
      {
        type,
        tenantId: ctx.tenantId,
        actor: ctx.actor,
        ip: ctx.ip,
        metadata: { [events.idKey]: row.id, name: row.name },
      },
      conn,
    );

  const insert = async (conn: Db, ctx: ResourceContext, input: Input) => {
    const row = await spec.insert(conn, ctx.tenantId, uuidv7(), input);
    await record(conn, ctx, events.created, row);
    return row;
  };

  const update = async (conn: Db, ctx: ResourceContext, id: string, input: Input) => {
    const row = await spec.update(conn, ctx.tenantId, id, input);
    if (!row) throw AppError.notFound(spec.noun);
    await record(conn, ctx, events.updated, row);
    return row;
  };

  const mapErrors = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      if (isUniqueViolation(err, spec.nameConstraint)) {
        throw new AppError('conflict', spec.nameTaken, { extra: { errors: { name: ['is already taken'] } } });
      }
      throw spec.mapError?.(err) ?? err;
    }
  };

  return {
    async get(ctx, id) {
      return await view(db, ctx.tenantId, await find(db, ctx.tenantId, id));
    },

    async create(ctx, input) {
      const n = normalize(input);
      return await mapErrors(() =>
        db.transaction().execute(async (trx) => view(trx, ctx.tenantId, await insert(trx, ctx, n))),
      );
    },

    async update(ctx, id, input) {
      const n = normalize(input);
      return await mapErrors(() =>
        db.transaction().execute(async (trx) => {
          await find(trx, ctx.tenantId, id);
          return await view(trx, ctx.tenantId, await update(trx, ctx, id, n));
        }),
      );
    },

    async remove(ctx, id) {
      await db.transaction().execute(async (trx) => {
        const row = await find(trx, ctx.tenantId, id);
        await spec.beforeDelete?.(trx, ctx.tenantId, row);
        // Both callers may have passed find(); the row lock makes the second DELETE wait
        // for the first to commit and then remove nothing.
        if (!(await spec.delete(trx, ctx.tenantId, id))) throw AppError.notFound(spec.noun);
        await record(trx, ctx, events.deleted, row);
      });
    },

    async upsertByName(ctx, input, trx) {
      const n = normalize(input);
      return await mapErrors(async () => {
        const existing = await spec.findByName(trx, ctx.tenantId, n.name);
        if (!existing) return { id: (await insert(trx, ctx, n)).id, action: 'created' as const };
        if (await spec.unchanged(trx, ctx.tenantId, existing, n)) {
          return { id: existing.id, action: 'unchanged' as const };
        }
        await update(trx, ctx, existing.id, n);
        return { id: existing.id, action: 'updated' as const };
      });
    },
  };
}
