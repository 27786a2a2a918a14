// Who performs a resource operation: the tenant it is scoped to and how to audit it.
import type { FastifyRequest } from 'fastify';
import { type AuditEntry, auditActorFrom } from '../audit/audit.service.ts';
import { principalOf } from '../auth/auth.plugin.ts';

export interface ResourceContext {
  tenantId: string;
  actor: AuditEntry['actor'];
  ip: string | null;
}

export function contextOf(request: FastifyRequest): ResourceContext {
  const principal = principalOf(request);
  return { tenantId: principal.tenantId, actor: auditActorFrom(principal), ip: request.ip };
}

/** Deterministic JSON (object keys sorted) for "did anything change" comparisons. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
        )
      : v,
  );
}

/** PostgreSQL unique_violation on the given constraint. */
export function isUniqueViolation(err: unknown, constraint: string): boolean {
  const e = err as { code?: string; constraint?: string } | null;
  return e?.code === '23505' && e.constraint === constraint;
}

export function isForeignKeyViolation(err: unknown): boolean {
  return (err as { code?: string } | null)?.code === '23503';
}
