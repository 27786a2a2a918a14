// Helpers for account tests: cookies out of responses, a started job runner, and direct
// reads of audit rows.
import type { LightMyRequestResponse } from 'fastify';
import { type JobRunner, startJobRunner } from '../../src/jobs/worker.ts';
import type { TestApp } from './app.ts';

/** The value of the paddock_session cookie a response set. */
export function sessionCookie(res: LightMyRequestResponse): string {
  const cookie = res.cookies.find((c) => c.name === 'paddock_session');
  if (!cookie?.value) throw new Error(`no session cookie in response (${res.statusCode} ${res.body})`);
  return cookie.value;
}

/** Headers of a browser request from the instance's own origin carrying the session cookie. */
export function browser(t: TestApp, cookie: string): Record<string, string> {
  return { cookie: `paddock_session=${cookie}`, origin: t.config.publicUrl.origin };
}

export async function startJobs(t: TestApp): Promise<JobRunner> {
  return await startJobRunner({
    pool: t.database.handle.pool,
    logger: t.deps.logger,
    tasks: t.deps.jobTasks,
    pollIntervalMs: 100,
  });
}

export async function auditRows(t: TestApp, type?: string) {
  let q = t.deps.db.selectFrom('audit_events').selectAll();
  if (type) q = q.where('type', '=', type);
  return await q.orderBy('id').execute();
}
