// Issue 14, finding 13: the served OpenAPI document marks every protected operation with
// `security` and every public one with `security: []`, gives each an operationId and a
// documented 4xx, and passes Redocly's recommended rules with no problem at all. Redocly
// runs offline: telemetry and update checks off, and any proxy it might use points nowhere.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { buildTestApp, type TestApp } from './helpers/app.ts';

const REDOCLY = resolve(import.meta.dirname, '../../../node_modules/@redocly/cli/bin/cli.js');
const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

interface Operation {
  operationId?: string;
  security?: unknown[];
  responses?: Record<string, unknown>;
}

let t: TestApp;
let doc: { paths: Record<string, Record<string, Operation>> };
let raw: string;
before(async () => {
  // A public origin that is neither localhost nor example.com, as a deployment's would be.
  t = await buildTestApp({ env: { PUBLIC_URL: 'http://paddock.internal' } });
  const res = await t.app.inject({ method: 'GET', url: '/api/openapi.json' });
  assert.equal(res.statusCode, 200);
  raw = res.body;
  doc = res.json();
});
after(async () => {
  await t.close();
});

const operations = () =>
  Object.entries(doc.paths).flatMap(([path, item]) =>
    Object.entries(item)
      .filter(([method]) => METHODS.includes(method))
      .map(([method, op]) => ({ name: `${method.toUpperCase()} ${path}`, op })),
  );

describe('the OpenAPI document (finding 13)', () => {
  it('marks operations that require credentials with security, and public ones with security: []', () => {
    const security = new Map(operations().map(({ name, op }) => [name, op.security]));
    const isProtected = (name: string) => (security.get(name)?.length ?? 0) > 0;
    for (const name of [
      'GET /api/auth/me',
      'GET /api/auth/api-keys',
      'POST /api/auth/api-keys',
      'DELETE /api/auth/api-keys/{id}',
      'POST /api/auth/password',
      'GET /api/admin/users',
      'GET /api/audit',
      'GET /api/environments',
      'POST /api/apply',
    ]) {
      assert.ok(isProtected(name), `${name} is not marked as protected`);
    }
    for (const name of ['POST /api/auth/login', 'POST /api/auth/register', 'POST /api/auth/token']) {
      assert.deepEqual(security.get(name), [], `${name} is not marked as public`);
    }
    for (const { name, op } of operations()) assert.ok(Array.isArray(op.security), `${name} has no security`);
  });

  it('matches the routes: an operation marked public answers without credentials, a protected one 401s', async () => {
    for (const { name, op } of operations()) {
      if (name.includes('{') || !name.startsWith('GET ')) continue;
      const res = await t.app.inject({ method: 'GET', url: name.slice(4) });
      if ((op.security?.length ?? 0) > 0) assert.equal(res.statusCode, 401, name);
      else assert.notEqual(res.statusCode, 401, name);
    }
  });

  it('gives every operation a unique operationId and a documented 4xx', () => {
    const ids = operations().map(({ name, op }) => {
      assert.match(op.operationId ?? '', /^[a-z][A-Za-z0-9]+$/, `${name} has no operationId`);
      assert.ok(
        Object.keys(op.responses ?? {}).some((code) => code.startsWith('4')),
        `${name} documents no 4xx`,
      );
      return op.operationId;
    });
    assert.equal(new Set(ids).size, ids.length, 'operationIds repeat');
  });

  it('passes `redocly lint` with the recommended rules, without errors or warnings, offline', () => {
    const dir = mkdtempSync(join(tmpdir(), 'paddock-openapi-'));
    try {
      const file = join(dir, 'openapi.json');
      writeFileSync(file, raw);
      const lint = spawnSync(
        process.execPath,
        [REDOCLY, 'lint', '--extends=recommended', '--format=json', file],
        {
          cwd: dir,
          encoding: 'utf8',
          timeout: 120_000,
          env: {
            PATH: process.env['PATH'] ?? '',
            HOME: dir,
            REDOCLY_TELEMETRY: 'off',
            REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true',
            // Nothing may be fetched: a request through these proxies fails at once.
            HTTP_PROXY: 'http://127.0.0.1:9',
            HTTPS_PROXY: 'http://127.0.0.1:9',
            NO_PROXY: '',
          },
        },
      );
      assert.equal(lint.status, 0, `${lint.stdout}\n${lint.stderr}`);
      const report = JSON.parse(lint.stdout) as { totals: { errors: number; warnings: number } };
      assert.deepEqual(report.totals, { ...report.totals, errors: 0, warnings: 0 }, lint.stdout);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
