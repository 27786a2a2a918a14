import { createServer, type Server } from 'node:http';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';

export interface Metrics {
  registry: Registry;
  httpDuration: Histogram<'method' | 'route' | 'status_code'>;
  auditRejected: Counter<'event_type'>;
  /** Open conversation log streams in this process (stream-viewers.ts). */
  streamViewers: Gauge;
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
  return { registry, httpDuration, auditRejected, streamViewers };
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
