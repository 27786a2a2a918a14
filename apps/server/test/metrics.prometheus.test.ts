// deploy/prometheus/ with the real tools: promtool checks the alert rules, runs their unit tests
// and checks the example config; then a real Prometheus scrapes a real `paddock-server serve`
// (its private METRICS_PORT) every second, evaluates every rule of alerts.yml on what it scraped
// (all healthy, none firing on a healthy server), fires a test alert once the server refuses
// requests with 429, and runs every expression of the Grafana dashboard.
// Needs Debian's `prometheus` package (promtool and prometheus; scripts/ci-system-deps.sh
// installs it): without it the suite fails saying so, it never skips.
import assert from 'node:assert/strict';
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { freePort } from '../src/db/embedded.ts';
import { createTestDatabase, type TestDatabase } from './helpers/database.ts';
import {
  ALERT_TESTS_PATH,
  ALERTS_PATH,
  asSent,
  dashboardExpressions,
  exposedNames,
  metricNamesIn,
  PROMETHEUS_CONFIG_PATH,
  readDashboard,
} from './helpers/metrics-catalogue.ts';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
/** The test's own alert: any rate-limit refusal, at once (the real ones wait minutes). */
const TEST_ALERT = 'PaddockTestRateLimited';

/** The program on PATH or in the sbin/bin directories Debian installs to; null when absent. */
function which(program: string): string | null {
  const dirs = [...(process.env['PATH'] ?? '').split(delimiter), '/usr/sbin', '/usr/bin', '/sbin', '/bin'];
  for (const dir of dirs) if (dir && existsSync(join(dir, program))) return join(dir, program);
  return null;
}

function run(file: string, args: string[]): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { timeout: 60_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, output: `${stdout}${stderr}` });
    });
  });
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`timed out waiting for ${what}${last ? `: ${String(last)}` : ''}`);
}

async function stop(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

interface PromAlert {
  labels: Record<string, string>;
  state: 'pending' | 'firing';
}
interface PromRule {
  name: string;
  query: string;
  health: string;
  lastError?: string;
  state?: string;
  type: string;
  lastEvaluation: string;
}

describe('metrics with a real Prometheus', () => {
  let promtool: string;
  let prometheus: string;
  let db: TestDatabase | undefined;
  let server: ChildProcess | undefined;
  let prom: ChildProcess | undefined;
  let dir: string | undefined;
  let port = 0;
  let metricsPort = 0;
  let promUrl = '';
  let serverOut = '';
  let promOut = '';

  const api = async <T>(path: string): Promise<T> => {
    const res = await fetch(`${promUrl}${path}`);
    const body = (await res.json()) as { status: string; data: T; error?: string };
    if (body.status !== 'success') throw new Error(`${path}: ${body.error ?? res.status}`);
    return body.data;
  };
  const rules = async (): Promise<PromRule[]> =>
    (await api<{ groups: Array<{ rules: PromRule[] }> }>('/api/v1/rules')).groups.flatMap((g) => g.rules);

  before(async () => {
    const tool = which('promtool');
    const server_ = which('prometheus');
    if (!tool || !server_)
      throw new Error(
        'promtool and prometheus are not installed: install Debian package `prometheus` (bash scripts/ci-system-deps.sh)',
      );
    promtool = tool;
    prometheus = server_;

    db = await createTestDatabase();
    port = await freePort();
    metricsPort = await freePort();
    server = spawn(process.execPath, [MAIN, 'serve'], {
      env: {
        PATH: process.env['PATH'] ?? '',
        NODE_ENV: 'test',
        LOG_LEVEL: 'warn',
        PORT: String(port),
        METRICS_PORT: String(metricsPort),
        DATABASE_URL: db.url,
        DATABASE_SSL: 'false',
        MASTER_SECRETS_KEY: randomBytes(32).toString('base64url'),
        EMAIL_DELIVERY: 'none',
        RATE_LIMIT_MAX: '3',
        RATE_LIMIT_WINDOW_SECONDS: '60',
      },
    });
    server.stdout?.on('data', (d) => {
      serverOut += d;
    });
    server.stderr?.on('data', (d) => {
      serverOut += d;
    });
    await waitFor('the server to listen', async () => {
      if (server?.exitCode !== null) throw new Error(`the server exited: ${serverOut}`);
      const res = await fetch(`http://127.0.0.1:${metricsPort}/health`).catch(() => null);
      return res?.ok ? true : undefined;
    });

    dir = mkdtempSync(join(tmpdir(), 'prometheus-'));
    writeFileSync(
      join(dir, 'test-rules.yml'),
      [
        'groups:',
        '  - name: test',
        '    rules:',
        `      - alert: ${TEST_ALERT}`,
        '        expr: sum(paddock_rate_limit_refusals_total{job="paddock"}) > 0',
        '        for: 2s',
        '        labels: { severity: info }',
        '',
      ].join('\n'),
    );
    writeFileSync(
      join(dir, 'prometheus.yml'),
      [
        'global:',
        '  scrape_interval: 1s',
        '  evaluation_interval: 1s',
        'rule_files:',
        `  - ${JSON.stringify(ALERTS_PATH)}`,
        `  - ${JSON.stringify(join(dir, 'test-rules.yml'))}`,
        'scrape_configs:',
        '  - job_name: paddock',
        '    static_configs:',
        `      - targets: ['127.0.0.1:${metricsPort}']`,
        '',
      ].join('\n'),
    );
    const promPort = await freePort();
    promUrl = `http://127.0.0.1:${promPort}`;
    prom = spawn(prometheus, [
      `--config.file=${join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${promPort}`,
      '--log.level=warn',
    ]);
    prom.stdout?.on('data', (d) => {
      promOut += d;
    });
    prom.stderr?.on('data', (d) => {
      promOut += d;
    });
    await waitFor('Prometheus to be ready', async () => {
      if (prom?.exitCode !== null) throw new Error(`prometheus exited: ${promOut}`);
      const res = await fetch(`${promUrl}/-/ready`).catch(() => null);
      return res?.ok ? true : undefined;
    });
    await waitFor('the first successful scrape of the server', async () => {
      const data = await api<{ activeTargets: Array<{ health: string; lastError: string }> }>(
        '/api/v1/targets',
      );
      return data.activeTargets.some((t) => t.health === 'up') ? true : undefined;
    });
  });

  after(async () => {
    await stop(prom);
    await stop(server);
    if (dir) rmSync(dir, { recursive: true, force: true });
    await db?.drop();
  });

  it('promtool accepts the alert rules, their unit tests and the example config', async () => {
    const check = await run(promtool, ['check', 'rules', ALERTS_PATH]);
    assert.equal(check.code, 0, check.output);
    assert.match(check.output, /SUCCESS: \d+ rules found/);
    const tests = await run(promtool, ['test', 'rules', ALERT_TESTS_PATH]);
    assert.equal(tests.code, 0, tests.output);
    assert.match(tests.output, /SUCCESS/);
    const config = await run(promtool, ['check', 'config', PROMETHEUS_CONFIG_PATH]);
    assert.equal(config.code, 0, config.output);
  });

  it('evaluates every rule of alerts.yml on the scraped server without error, none of them active', async () => {
    const exposed = exposedNames(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text());
    // Evaluated at least twice after a scrape: the rate() of every rule has two samples.
    const evaluated = await waitFor('every rule evaluated', async () => {
      const all = (await rules()).filter((r) => r.name !== TEST_ALERT);
      return all.length > 0 && all.every((r) => Date.parse(r.lastEvaluation) > Date.now() - 2000)
        ? all
        : undefined;
    });
    await new Promise((r) => setTimeout(r, 2500));
    const all = (await rules()).filter((r) => r.name !== TEST_ALERT);
    assert.equal(all.length, evaluated.length);
    assert.ok(all.length >= 9, `the rules of alerts.yml are loaded (${all.length})`);
    for (const rule of all) {
      assert.equal(rule.health, 'ok', `${rule.name}: ${rule.lastError ?? ''}`);
      assert.equal(rule.state, 'inactive', `${rule.name} is not active on a healthy server`);
      for (const name of metricNamesIn(rule.query))
        if (name !== 'up') assert.ok(exposed.has(name), `${rule.name}: ${name} is not on /metrics`);
    }
    // The scrape-time gauges report: the server is ready, and no sandbox is live.
    const ready = await api<{ result: Array<{ value: [number, string] }> }>(
      `/api/v1/query?query=${encodeURIComponent('paddock_ready{job="paddock"}')}`,
    );
    assert.equal(ready.result[0]?.value[1], '1');
    const live = await api<{ result: Array<{ metric: Record<string, string>; value: [number, string] }> }>(
      `/api/v1/query?query=${encodeURIComponent('paddock_live_sandboxes{job="paddock"}')}`,
    );
    assert.deepEqual(live.result.map((r) => [r.metric['status'], r.value[1]]).sort(), [
      ['pending', '0'],
      ['ready', '0'],
      ['starting', '0'],
    ]);
  });

  it('fires an alert once the server refuses requests with 429', async () => {
    const alerts = async () => (await api<{ alerts: PromAlert[] }>('/api/v1/alerts')).alerts;
    assert.deepEqual(
      (await alerts()).filter((a) => a.labels['alertname'] === TEST_ALERT),
      [],
      'no refusal yet, no alert',
    );
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await fetch(`http://127.0.0.1:${port}/api/agents`)).status);
    assert.ok(statuses.includes(429), `refused past RATE_LIMIT_MAX=3: ${statuses.join(' ')}`);
    const firing = await waitFor('the test alert to fire', async () => {
      const found = (await alerts()).find((a) => a.labels['alertname'] === TEST_ALERT);
      return found?.state === 'firing' ? found : undefined;
    });
    assert.equal(firing.labels['severity'], 'info');
    // The refusals are counted by route template, never by raw URL.
    const series = await api<{ result: Array<{ metric: Record<string, string>; value: [number, string] }> }>(
      `/api/v1/query?query=${encodeURIComponent('paddock_rate_limit_refusals_total{job="paddock"}')}`,
    );
    assert.deepEqual(
      series.result.map((r) => [r.metric['route'], r.value[1]]),
      [['/api/agents', String(statuses.filter((s) => s === 429).length)]],
    );
  });

  it('runs every expression of the Grafana dashboard, each naming only metrics the server exposes', async () => {
    const exposed = exposedNames(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text());
    for (const { where, expr } of dashboardExpressions(readDashboard())) {
      await api(`/api/v1/query?query=${encodeURIComponent(asSent(expr))}`).catch((err: unknown) => {
        assert.fail(`${where}: Prometheus refused ${expr}: ${String(err)}`);
      });
      for (const name of metricNamesIn(expr))
        if (name !== 'up') assert.ok(exposed.has(name), `${where}: ${name} is not on /metrics`);
    }
  });
});
