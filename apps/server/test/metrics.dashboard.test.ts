// deploy/grafana/paddock.json: a valid Grafana dashboard model whose every query reads through
// the datasource variable and names only metrics the server's /metrics listener exposes (so the
// dashboard cannot drift from the code). metrics.prometheus.test.ts also has a real Prometheus
// run every expression.
import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import { after, before, describe, it } from 'node:test';
import { freePort } from '../src/db/embedded.ts';
import { createMetrics, startMetricsServer } from '../src/observability/metrics.ts';
import {
  allPanels,
  dashboardExpressions,
  exposedNames,
  metricNamesIn,
  readDashboard,
} from './helpers/metrics-catalogue.ts';

describe('the Grafana dashboard', () => {
  let server: Server;
  let exposition = '';
  before(async () => {
    const port = await freePort();
    server = await startMetricsServer(createMetrics(), port, '127.0.0.1');
    const res = await fetch(`http://127.0.0.1:${port}/metrics`);
    assert.equal(res.status, 200);
    exposition = await res.text();
  });
  after(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  it('parses as a dashboard with a Prometheus datasource variable that every panel and query uses', () => {
    const dashboard = readDashboard();
    assert.equal(typeof dashboard.uid, 'string');
    assert.ok(dashboard.title);
    assert.ok(dashboard.schemaVersion >= 30, 'a current schemaVersion');
    const datasource = dashboard.templating.list.find((v) => v.type === 'datasource');
    assert.ok(datasource, 'a datasource variable');
    assert.equal(datasource.query, 'prometheus');
    const ref = `\${${datasource.name}}`;
    const ids = new Set<number>();
    for (const panel of allPanels(dashboard)) {
      assert.ok(!ids.has(panel.id), `panel id ${panel.id} is unique`);
      ids.add(panel.id);
      assert.ok(panel.gridPos, `panel "${panel.title}" has a position`);
      assert.ok(panel.gridPos.x + panel.gridPos.w <= 24, `panel "${panel.title}" fits the 24-column grid`);
      if (panel.type === 'row') continue;
      assert.equal(panel.datasource?.uid, ref, `panel "${panel.title}" uses ${ref}`);
      assert.ok((panel.targets ?? []).length > 0, `panel "${panel.title}" has a query`);
      for (const target of panel.targets ?? []) {
        assert.ok(target.expr, `panel "${panel.title}" ${target.refId}: an expression`);
        assert.equal(target.datasource?.uid, ref, `panel "${panel.title}" ${target.refId} uses ${ref}`);
      }
    }
    for (const variable of dashboard.templating.list)
      if (variable.type === 'query') assert.equal(variable.datasource?.uid, ref, `variable ${variable.name}`);
  });

  it('names only metrics that /metrics exposes, and has a panel for every paddock_ metric', () => {
    const exposed = exposedNames(exposition);
    const used = new Set<string>();
    for (const { where, expr } of dashboardExpressions(readDashboard())) {
      const names = metricNamesIn(expr);
      assert.ok(names.length > 0, `${where}: names a metric (${expr})`);
      for (const name of names) {
        // `up` is Prometheus's own series of each scrape.
        if (name !== 'up') assert.ok(exposed.has(name), `${where}: ${name} is not on /metrics`);
        used.add(name.replace(/_(bucket|sum|count)$/, ''));
      }
    }
    // The catalogue: every metric of the server's own (not the Node.js process defaults) is on the dashboard.
    const own = [...exposition.matchAll(/^# TYPE (paddock_\S+) /gm)]
      .map((m) => m[1] as string)
      .filter((name) => !/^paddock_(process|nodejs)_/.test(name));
    const missing = own.filter((name) => !used.has(name));
    assert.deepEqual(missing, [], 'metrics without a panel');
  });

  it('reads metric names out of PromQL as Prometheus would', () => {
    assert.deepEqual(
      metricNamesIn(
        'sum by (le, route) (rate(paddock_http_request_duration_seconds_bucket{job="paddock", route=~"a|b"}[$__rate_interval])) / on (x) up',
      ),
      ['paddock_http_request_duration_seconds_bucket', 'up'],
    );
  });
});
