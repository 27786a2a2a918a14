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
  /** What the sandbox reaper did, by action (`destroyed`, `freed`, `expired`). */
  reaperActions: Counter<'action'>;
  /** One provisioning stage's duration, by stage and its end (`done`, `failed`, `interrupted`). */
  provisioningStageDuration: Histogram<'stage' | 'outcome'>;
  /** From the owner starting a turn to its first output byte, by runtime. */
  turnFirstOutput: Histogram<'runtime'>;
  turnsStarted: Counter<'runtime'>;
  /** Turns that ended on this process, by runtime and outcome (`succeeded`, `failed`, `interrupted`). */
  turnsFinished: Counter<'runtime' | 'outcome'>;
  /** Output and turn-event bytes stored in conversation logs. */
  logBytes: Counter;
  /** Secret occurrences replaced by the redaction marker (conversation redactors). */
  logRedactions: Counter;
  /** Conversations whose durable output budget (LOG_OUTPUT_BUDGET_MB) was reached. */
  logBudgetReached: Counter;
  /** Requests refused with 429, by route template. */
  rateLimitRefusals: Counter<'route'>;
  /** Conversations this process took over from an owner that is gone (orphans adopted). */
  ownerTakeovers: Counter;
  /**
   * Where the scrape-time gauges read from (deps.ts sets it): the cluster's live conversations
   * and sandboxes from the database (live-counts.ts), and whether this process is ready (its database answers).
   */
  setScrapeSources(sources: ScrapeSources): void;
}

/** The cluster's live rows, counted by status (read at scrape time). */
export interface LiveCounts {
  conversations: Partial<Record<string, number>>;
  sandboxes: Partial<Record<string, number>>;
}

export interface ScrapeSources {
  live(): Promise<LiveCounts>;
  ready(): Promise<boolean>;
}

/** The statuses the live gauges report, always all of them (a missing series reads as 0). */
const LIVE_CONVERSATION_STATUSES = ['pending', 'running'] as const;
const LIVE_SANDBOX_STATUSES = ['pending', 'starting', 'ready'] as const;
/** One database read serves every gauge of one scrape (each gauge collects on its own). */
const LIVE_CACHE_MS = 500;

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
  const reaperActions = new Counter({
    name: 'paddock_sandbox_reaper_actions_total',
    help: 'Sandboxes the sandbox reaper destroyed (terminal rows), freed (stuck provisions) or expired, by action',
    labelNames: ['action'] as const,
    registers: [registry],
  });
  const provisioningStageDuration = new Histogram({
    name: 'paddock_provisioning_stage_duration_seconds',
    help: 'Duration of one provisioning stage (conversations and environment checkpoint builds), by stage and outcome (done, failed, interrupted)',
    labelNames: ['stage', 'outcome'] as const,
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600],
    registers: [registry],
  });
  const turnFirstOutput = new Histogram({
    name: 'paddock_turn_first_output_seconds',
    help: "Time from the owner starting a turn to the turn's first output byte, by runtime",
    labelNames: ['runtime'] as const,
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [registry],
  });
  const turnsStarted = new Counter({
    name: 'paddock_turns_started_total',
    help: 'Turns whose process was started in a sandbox, by runtime',
    labelNames: ['runtime'] as const,
    registers: [registry],
  });
  const turnsFinished = new Counter({
    name: 'paddock_turns_finished_total',
    help: 'Turns that ended on this process, by runtime and outcome (succeeded, failed, interrupted)',
    labelNames: ['runtime', 'outcome'] as const,
    registers: [registry],
  });
  const logBytes = new Counter({
    name: 'paddock_log_bytes_total',
    help: 'Bytes of output and turn events stored in conversation logs (redacted, within the budget)',
    registers: [registry],
  });
  const logRedactions = new Counter({
    name: 'paddock_log_redactions_total',
    help: "Secret occurrences replaced by [REDACTED] by a conversation's redactors (its log and its server log lines)",
    registers: [registry],
  });
  const logBudgetReached = new Counter({
    name: 'paddock_log_budget_reached_total',
    help: 'Conversations whose durable output budget (LOG_OUTPUT_BUDGET_MB) was reached: one truncation marker each',
    registers: [registry],
  });
  const rateLimitRefusals = new Counter({
    name: 'paddock_rate_limit_refusals_total',
    help: 'Requests refused with 429 rate_limited, by route template',
    labelNames: ['route'] as const,
    registers: [registry],
  });
  const ownerTakeovers = new Counter({
    name: 'paddock_owner_takeovers_total',
    help: 'Conversations this process took over because no live process owned them (their owner died or let go)',
    registers: [registry],
  });

  let sources: ScrapeSources | null = null;
  let cached: { at: number; counts: Promise<LiveCounts> } | null = null;
  /** The live counts, read once per scrape; a failed read leaves the gauges as they were. */
  const liveCounts = (): Promise<LiveCounts> | null => {
    if (!sources) return null;
    const now = Date.now();
    if (!cached || now - cached.at > LIVE_CACHE_MS) cached = { at: now, counts: sources.live() };
    return cached.counts;
  };
  new Gauge({
    name: 'paddock_live_conversations',
    help: 'Conversations pending or running (a turn queued or running) in the whole cluster (read from the database at scrape time), by status',
    labelNames: ['status'] as const,
    registers: [registry],
    async collect() {
      const counts = await liveCounts()?.catch(() => null);
      if (!counts) return;
      for (const status of LIVE_CONVERSATION_STATUSES)
        this.set({ status }, counts.conversations[status] ?? 0);
    },
  });
  new Gauge({
    name: 'paddock_live_sandboxes',
    help: 'Sandbox rows pending, starting or ready in the whole cluster (read from the database at scrape time), by status',
    labelNames: ['status'] as const,
    registers: [registry],
    async collect() {
      const counts = await liveCounts()?.catch(() => null);
      if (!counts) return;
      for (const status of LIVE_SANDBOX_STATUSES) this.set({ status }, counts.sandboxes[status] ?? 0);
    },
  });
  new Gauge({
    name: 'paddock_ready',
    help: 'Whether this process is ready (1: its database answers, as /health/ready says; 0: not)',
    registers: [registry],
    async collect() {
      if (!sources) return;
      this.set((await sources.ready().catch(() => false)) ? 1 : 0);
    },
  });

  return {
    registry,
    reaperActions,
    provisioningStageDuration,
    turnFirstOutput,
    turnsStarted,
    turnsFinished,
    logBytes,
    logRedactions,
    logBudgetReached,
    rateLimitRefusals,
    ownerTakeovers,
    setScrapeSources(next) {
      sources = next;
      cached = null;
    },
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
