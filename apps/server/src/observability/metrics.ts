import { createServer, type Server } from 'node:http';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

export interface Metrics {
  registry: Registry;
  httpDuration: Histogram<'method' | 'route' | 'status_code'>;
  auditRejected: Counter<'event_type'>;
  /** Open conversation log streams in this process (stream-viewers.ts). */
  streamViewers: Gauge;
  /** Scheduled job runs by outcome (`ok`, `failed`: it threw, or some items failed). */
  jobRuns: Counter<'job' | 'outcome'>;
  jobDuration: Histogram<'job'>;
  /** Items a scheduled job acted on (destroyed, deleted, freed, ...). */
  jobItems: Counter<'job'>;
  /** Items a scheduled job failed on, plus one per run that threw. */
  jobFailures: Counter<'job'>;
  /** Backend sandboxes that no row knows, as the reaper's last full listing found them. */
  untrackedSandboxes: Gauge;
}

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'paddock_' });
  const httpDuration = new Histogram({
    name: 'paddock_http_request_duration_seconds',
    help: 'HTTP request duration by route template and status code',
    labelNames: ['method', 'route', 'status_code'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  const auditRejected = new Counter({
    name: 'paddock_audit_rejected_total',
    help: 'Audit events refused because their type is not on the allowlist',
    labelNames: ['event_type'] as const,
    registers: [registry],
  });
  const streamViewers = new Gauge({
    name: 'paddock_conversation_stream_viewers',
    help: 'Open conversation log streams (SSE viewers) in this process',
    registers: [registry],
  });
  const jobRuns = new Counter({
    name: 'paddock_job_runs_total',
    help: 'Scheduled job runs by job and outcome (ok, failed)',
    labelNames: ['job', 'outcome'] as const,
    registers: [registry],
  });
  const jobDuration = new Histogram({
    name: 'paddock_job_duration_seconds',
    help: 'Scheduled job run duration by job',
    labelNames: ['job'] as const,
    buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600],
    registers: [registry],
  });
  const jobItems = new Counter({
    name: 'paddock_job_items_total',
    help: 'Items scheduled jobs acted on (sandboxes destroyed or freed, rows deleted), by job',
    labelNames: ['job'] as const,
    registers: [registry],
  });
  const jobFailures = new Counter({
    name: 'paddock_job_failures_total',
    help: 'Items scheduled jobs failed on, and runs that failed outright, by job',
    labelNames: ['job'] as const,
    registers: [registry],
  });
  const untrackedSandboxes = new Gauge({
    name: 'paddock_untracked_sandboxes',
    help: "Backend sandboxes no row knows, as the sandbox reaper's last full listing found them",
    registers: [registry],
  });
  return {
    registry,
    httpDuration,
    auditRejected,
    streamViewers,
    jobRuns,
    jobDuration,
    jobItems,
    jobFailures,
    untrackedSandboxes,
  };
}

/**
 * The private listener: /metrics and /health only. It is a separate server bound to
 * METRICS_PORT and never mounted on the public listener.
 */
export async function startMetricsServer(metrics: Metrics, port: number, host: string): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'GET' && path === '/metrics') {
      metrics.registry.metrics().then(
        (body) => {
          res.writeHead(200, { 'content-type': metrics.registry.contentType });
          res.end(body);
        },
        () => {
          res.writeHead(500, { 'content-type': 'text/plain' });
          res.end('metrics unavailable\n');
        },
      );
      return;
    }
    if (req.method === 'GET' && path === '/health') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"status":"ok"}');
      return;
    }
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end('{"error":"not_found","message":"not found"}');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return server;
}
