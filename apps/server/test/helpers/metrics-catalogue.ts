// The deploy/ artifacts as the metrics tests read them: the Grafana dashboard's panels and
// PromQL expressions, and the metric names an expression or a /metrics exposition names.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const DEPLOY = fileURLToPath(new URL('../../../../deploy/', import.meta.url));
export const DASHBOARD_PATH = `${DEPLOY}grafana/paddock.json`;
export const ALERTS_PATH = `${DEPLOY}prometheus/alerts.yml`;
export const ALERT_TESTS_PATH = `${DEPLOY}prometheus/alerts.test.yml`;
export const PROMETHEUS_CONFIG_PATH = `${DEPLOY}prometheus/prometheus.yml`;

export interface DashboardPanel {
  id: number;
  type: string;
  title: string;
  datasource?: { type?: string; uid?: string };
  gridPos?: { h: number; w: number; x: number; y: number };
  targets?: Array<{ expr?: string; refId?: string; datasource?: { uid?: string } }>;
  panels?: DashboardPanel[];
}

export interface Dashboard {
  uid: string;
  title: string;
  schemaVersion: number;
  panels: DashboardPanel[];
  templating: { list: Array<{ name: string; type: string; query?: unknown; datasource?: { uid?: string } }> };
}

export function readDashboard(): Dashboard {
  return JSON.parse(readFileSync(DASHBOARD_PATH, 'utf8')) as Dashboard;
}

/** Every panel, those inside collapsed rows too. */
export function allPanels(dashboard: Dashboard): DashboardPanel[] {
  return dashboard.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
}

/** Every PromQL expression of the dashboard's panels and its variables' queries, with where it is. */
export function dashboardExpressions(dashboard: Dashboard): Array<{ where: string; expr: string }> {
  const out: Array<{ where: string; expr: string }> = [];
  for (const panel of allPanels(dashboard))
    for (const target of panel.targets ?? [])
      if (target.expr) out.push({ where: `panel "${panel.title}" ${target.refId ?? ''}`, expr: target.expr });
  for (const variable of dashboard.templating.list) {
    const query = variable.query as { query?: string } | string | undefined;
    const text = typeof query === 'string' ? query : query?.query;
    const inner = text?.match(/^label_values\((.+),\s*\w+\)$/)?.[1];
    if (variable.type === 'query' && inner) out.push({ where: `variable ${variable.name}`, expr: inner });
  }
  return out;
}

/** The expression with Grafana's variables replaced, as Grafana would send it to Prometheus. */
export function asSent(expr: string): string {
  return expr
    .replaceAll('$__rate_interval', '1m')
    .replaceAll('$__interval', '15s')
    .replaceAll('$__range', '1h')
    .replaceAll('$instance', '.*');
}

/**
 * The metric names an expression selects: identifiers outside strings, label matchers and
 * groupings, not followed by `(` (a function or an aggregation), that are not PromQL keywords.
 */
export function metricNamesIn(expr: string): string[] {
  const KEYWORDS = new Set([
    'by',
    'without',
    'on',
    'ignoring',
    'group_left',
    'group_right',
    'and',
    'or',
    'unless',
    'offset',
    'bool',
    'inf',
    'nan',
  ]);
  const stripped = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\[[^\]]*\]/g, '')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '');
  const names = new Set<string>();
  for (const m of stripped.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)) {
    const [, name, call] = m;
    if (!name || call || KEYWORDS.has(name.toLowerCase())) continue;
    // A number's exponent or a duration's unit is never an identifier here (brackets removed).
    names.add(name);
  }
  return [...names];
}

/** The series names a /metrics exposition offers: each family, plus a histogram's and a summary's parts. */
export function exposedNames(exposition: string): Set<string> {
  const names = new Set<string>();
  for (const line of exposition.split('\n')) {
    const m = line.match(/^# TYPE (\S+) (\S+)$/);
    if (!m) continue;
    const [, name, type] = m as unknown as [string, string, string];
    names.add(name);
    if (type === 'histogram') for (const part of ['_bucket', '_sum', '_count']) names.add(name + part);
    if (type === 'summary') for (const part of ['_sum', '_count']) names.add(name + part);
  }
  return names;
}
