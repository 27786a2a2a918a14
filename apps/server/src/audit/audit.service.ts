// The audit log: an append-only record of state-changing actions, auth events and admin
// actions. Invariants (audit.test.ts):
// - Only types on the allowlist (audit.events.ts) are written. Anything else is rejected
//   with an error-level log, paddock_audit_rejected_total{event_type} is incremented and
//   record() THROWS AuditTypeRejectedError without writing. Throwing (rather than silently
//   dropping) fails closed: when the caller records inside its own transaction, the
//   unaudited state change rolls back, and a missing allowlist entry fails that domain's
//   tests instead of going unnoticed.
// - Metadata never carries credentials: values under keys that name a secret (password,
//   token, secret, key hash, api key, cookie) are replaced by "[redacted]" before writing.
// - Rows are never updated (a database trigger refuses UPDATE).
import { v7 as uuidv7 } from 'uuid';
import type { Principal } from '../auth/principal.ts';
import type { Db } from '../db/database.ts';
import { AppError } from '../http/errors.ts';
import type { Logger } from '../observability/logger.ts';
import type { Metrics } from '../observability/metrics.ts';
import { AUDIT_EVENT_TYPES } from './audit.events.ts';
import { type AuditRow, insertAuditEvent, listAuditEvents } from './audit.repo.ts';

export interface AuditEntry {
  type: string;
  tenantId: string | null;
  actor: { kind: 'user' | 'api_key' | 'system'; userId?: string | null; apiKeyId?: string | null };
  ip?: string | null;
  metadata?: Record<string, unknown>;
}

export interface AuditEventView {
  id: string;
  type: string;
  tenant_id: string | null;
  actor: { kind: 'user' | 'api_key' | 'system'; user_id: string | null; api_key_id: string | null };
  ip: string | null;
  metadata: Record<string, unknown>;
  created_at: string;
}

export interface AuditPage {
  data: AuditEventView[];
  meta: { next_cursor: string | null; has_more: boolean };
}

export interface AuditService {
  /** Appends one event. Pass a transaction as `db` to commit it together with the change it records. */
  record(entry: AuditEntry, db?: Db): Promise<void>;
  /** One tenant's events, newest first. `cursor` is the opaque `next_cursor` of the previous page. */
  list(tenantId: string, opts: { limit?: number; cursor?: string }): Promise<AuditPage>;
}

export class AuditTypeRejectedError extends Error {
  readonly eventType: string;
  constructor(eventType: string) {
    super(`audit event type "${eventType}" is not on the allowlist (src/audit/audit.events.ts)`);
    this.name = 'AuditTypeRejectedError';
    this.eventType = eventType;
  }
}

export const AUDIT_PAGE_DEFAULT = 50;
export const AUDIT_PAGE_MAX = 200;

const SECRET_KEY = /pass(word)?|token|secret|hash|api_?key|cookie|authorization|credential/i;

/** Deep copy of `value` with every value under a secret-looking key replaced. */
export function scrubMetadata(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(scrubMetadata);
  if (value && typeof value === 'object' && !(value instanceof Date)) {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = SECRET_KEY.test(k) ? '[redacted]' : scrubMetadata(v);
    return out;
  }
  return value;
}

export function auditActorFrom(principal: Principal): AuditEntry['actor'] {
  return principal.via === 'api_key'
    ? { kind: 'api_key', userId: principal.userId, apiKeyId: principal.apiKeyId }
    : { kind: 'user', userId: principal.userId, apiKeyId: null };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function decodeCursor(cursor: string): string {
  const id = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!UUID.test(id)) throw AppError.validation({ cursor: ['is not a valid cursor'] });
  return id;
}

function toView(row: AuditRow): AuditEventView {
  return {
    id: row.id,
    type: row.type,
    tenant_id: row.tenant_id,
    actor: { kind: row.actor_kind, user_id: row.actor_user_id, api_key_id: row.actor_api_key_id },
    ip: row.ip,
    metadata: row.metadata,
    created_at: row.created_at.toISOString(),
  };
}

export function createAuditService(deps: { db: Db; logger: Logger; metrics: Metrics }): AuditService {
  return {
    async record(entry, db) {
      if (!AUDIT_EVENT_TYPES.has(entry.type)) {
        deps.logger.error({ eventType: entry.type }, 'audit event type rejected: not on the allowlist');
        deps.metrics.auditRejected.inc({ event_type: entry.type });
        throw new AuditTypeRejectedError(entry.type);
      }
      await insertAuditEvent(db ?? deps.db, {
        id: uuidv7(),
        tenant_id: entry.tenantId,
        type: entry.type,
        actor_kind: entry.actor.kind,
        actor_user_id: entry.actor.userId ?? null,
        actor_api_key_id: entry.actor.apiKeyId ?? null,
        ip: entry.ip ?? null,
        metadata: scrubMetadata(entry.metadata ?? {}) as Record<string, unknown>,
      });
    },

    async list(tenantId, opts) {
      const limit = Math.min(Math.max(opts.limit ?? AUDIT_PAGE_DEFAULT, 1), AUDIT_PAGE_MAX);
      const rows = await listAuditEvents(deps.db, tenantId, {
        limit: limit + 1,
        ...(opts.cursor ? { beforeId: decodeCursor(opts.cursor) } : {}),
      });
      const page = rows.slice(0, limit);
      const hasMore = rows.length > limit;
      const last = page.at(-1);
      return {
        data: page.map(toView),
        meta: {
          next_cursor: hasMore && last ? Buffer.from(last.id, 'utf8').toString('base64url') : null,
          has_more: hasMore,
        },
      };
    },
  };
}
