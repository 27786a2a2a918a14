// The usage meter's answers: one account's usage events that ended in a range, for the account
// itself (GET /api/account/usage) and for an admin (GET /api/admin/users/:id/usage, audited as
// admin.usage.read naming the target before the answer leaves, like the admin's other reads).
// A range is ISO dates, from < to, at most MAX_RANGE_DAYS long; anything else is a 400 saying
// which part is wrong.
import { findUserById } from '../accounts/accounts.repo.ts';
import type { RequestContext } from '../accounts/accounts.service.ts';
import { type AuditService, auditActorFrom } from '../audit/audit.service.ts';
import type { Principal } from '../auth/principal.ts';
import type { Db } from '../db/database.ts';
import { AppError } from '../http/errors.ts';
import { isUuid } from '../resources/fields.ts';
import { type TokenSums, usageSums } from './usage.repo.ts';
import type { UsageSummaryT } from './usage.schemas.ts';

/** A year and a day: a leap year's range from Jan 1 to Jan 1 fits. */
export const MAX_RANGE_DAYS = 366;

const DAY_MS = 24 * 60 * 60 * 1000;
const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,3}))?)?(Z|[+-]\d{2}:\d{2})?)?$/;

/** An ISO 8601 date (midnight UTC) or date-time; undefined unless every part is a real one. */
export function parseIsoDate(text: string): Date | undefined {
  const m = ISO.exec(text);
  if (!m) return undefined;
  const [year, month, day] = [m[1], m[2], m[3]].map(Number) as [number, number, number];
  const calendar = new Date(Date.UTC(year, month - 1, day));
  // Date.UTC rolls 2026-02-30 over to March (and years below 100 to the 1900s): a date that does
  // not come back as written does not exist.
  if (
    calendar.getUTCFullYear() !== year ||
    calendar.getUTCMonth() !== month - 1 ||
    calendar.getUTCDate() !== day
  )
    return undefined;
  if (m[4] === undefined) return calendar;
  if (Number(m[4]) > 23 || Number(m[5]) > 59 || Number(m[6] ?? 0) > 59) return undefined;
  // A date-time without an offset is read as UTC, as a date is.
  const parsed = new Date(m[8] === undefined ? `${text}Z` : text);
  return Number.isNaN(parsed.getTime()) ? undefined : parsed;
}

/** The start of the month of `now` and of the next one, UTC. */
export function thisMonth(now: Date): { from: Date; to: Date } {
  return {
    from: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)),
    to: new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1)),
  };
}

function invalid(field: string, message: string): AppError {
  return new AppError('invalid_query', message, { extra: { errors: { [field]: [message] } } });
}

/**
 * The range of a query. Without either bound, this month (UTC); with one, the month it falls in:
 * `from` alone runs to the start of the next month, `to` alone from the start of the month of the
 * instant before it (`to=2026-12-01` is November).
 */
export function parseRange(query: { from?: string | undefined; to?: string | undefined }, now: Date) {
  const read = (field: 'from' | 'to'): Date | undefined => {
    const text = query[field];
    if (text === undefined) return undefined;
    const date = parseIsoDate(text);
    if (!date) throw invalid(field, `${field} is not an ISO 8601 date (YYYY-MM-DD) or date-time`);
    return date;
  };
  const given = { from: read('from'), to: read('to') };
  const from =
    given.from ?? (given.to ? thisMonth(new Date(given.to.getTime() - 1)).from : thisMonth(now).from);
  const to = given.to ?? thisMonth(from).to;
  if (from.getTime() >= to.getTime()) throw invalid('to', 'from must be before to');
  if (to.getTime() - from.getTime() > MAX_RANGE_DAYS * DAY_MS)
    throw invalid('to', `the range is longer than ${MAX_RANGE_DAYS} days`);
  return { from, to };
}

export interface UsageService {
  /** The account's own usage. */
  mine(tenantId: string, query: { from?: string; to?: string }): Promise<UsageSummaryT>;
  /** Any account's usage, for an admin (audited). */
  ofAccount(
    admin: Principal,
    userId: string,
    query: { from?: string; to?: string },
    ctx: RequestContext,
  ): Promise<UsageSummaryT>;
}

export function createUsageService(deps: {
  db: Db;
  audit: Pick<AuditService, 'record'>;
  now?: () => Date;
}): UsageService {
  const { db, audit } = deps;
  const now = deps.now ?? (() => new Date());

  async function summary(tenantId: string, from: Date, to: Date): Promise<UsageSummaryT> {
    const sums = await usageSums(db, tenantId, from, to);
    const tokens = (t: TokenSums) => ({
      input_tokens: t.inputTokens,
      output_tokens: t.outputTokens,
      cache_read_tokens: t.cacheReadTokens,
      cost_usd: t.costUsd,
    });
    return {
      from: from.toISOString(),
      to: to.toISOString(),
      sandboxes: {
        count: sums.sandboxes,
        failed_before_ready: sums.failedBeforeReady,
        busy_seconds: sums.busySeconds,
        parked_seconds: sums.parkedSeconds,
      },
      turns: { count: sums.turns.count, ...tokens(sums.turns) },
      by_model: sums.byModel.map((m) => ({
        runtime: m.runtime,
        model: m.model,
        turns: m.turns,
        ...tokens(m),
      })),
    };
  }

  return {
    async mine(tenantId, query) {
      const { from, to } = parseRange(query, now());
      return await summary(tenantId, from, to);
    },

    async ofAccount(admin, userId, query, ctx) {
      const { from, to } = parseRange(query, now());
      const user = isUuid(userId) ? await findUserById(db, userId) : undefined;
      if (!user) throw AppError.notFound('user');
      await audit.record({
        type: 'admin.usage.read',
        tenantId: admin.tenantId,
        actor: auditActorFrom(admin),
        ip: ctx.ip,
        metadata: { target_user_id: user.id, from: from.toISOString(), to: to.toISOString() },
      });
      return await summary(user.id, from, to);
    },
  };
}
