import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import WebSocket from 'ws';
import { type ConformanceContext, forEachLimited } from './context.ts';

const pageTimeout = { timeout: 180_000 };

export function registerLifecycleTests(ctx: () => ConformanceContext): void {
  describe('authentication', () => {
    it('answers 401 to a REST call without a bearer token or with a wrong one', async () => {
      const missing = await ctx().raw('GET', '/v1/sandboxes', { token: null });
      assert.equal(missing.status, 401);
      await missing.body?.cancel();
      const wrong = await ctx().raw('GET', '/v1/sandboxes', { token: 'not-the-token' });
      assert.equal(wrong.status, 401);
      await wrong.body?.cancel();
    });

    it('refuses an exec upgrade without the bearer token', async () => {
      const name = await ctx().create('auth');
      const url = new URL(`${ctx().target.baseUrl.replace(/\/+$/, '')}/v1/sandboxes/${name}/exec?cmd=true`);
      url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
      const status = await new Promise<number>((resolve, reject) => {
        const socket = new WebSocket(url);
        socket.once('unexpected-response', (_request, response) => {
          resolve(response.statusCode ?? 0);
          socket.terminate();
        });
        socket.once('open', () => {
          socket.terminate();
          reject(new Error('the upgrade completed without a token'));
        });
        socket.once('error', () => undefined);
      });
      assert.equal(status, 401);
      await ctx().client.destroy(name);
    });
  });

  describe('lifecycle', () => {
    it('creates, gets, lists and destroys a sandbox; a destroyed sandbox answers 404', async () => {
      const { client } = ctx();
      const name = ctx().name('life');
      const created = await client.create(name, { retry: false });
      assert.equal(created.adopted, false);
      assert.equal(created.sandbox.name, name);

      const got = await client.get(name);
      assert.equal(got?.name, name);
      const listed = await client.list();
      assert.ok(
        listed.some((sandbox) => sandbox.name === name),
        'the new sandbox is listed',
      );

      await client.destroy(name);
      assert.equal(await client.get(name), null);
      const raw = await ctx().raw('GET', `/v1/sandboxes/${name}`);
      assert.equal(raw.status, 404);
      await raw.body?.cancel();
      assert.ok(
        !(await client.list()).some((sandbox) => sandbox.name === name),
        'a destroyed sandbox is not listed',
      );
    });

    it('treats destroying a missing sandbox as success (404 or 2xx)', async () => {
      const name = ctx().name('never');
      const raw = await ctx().raw('DELETE', `/v1/sandboxes/${name}`);
      assert.ok(
        raw.status === 404 || (raw.status >= 200 && raw.status < 300),
        `DELETE answered ${raw.status}`,
      );
      await raw.body?.cancel();
      await ctx().client.destroy(name);
    });

    it('creating an existing name answers 409 (or 400 "already exists") and the client adopts it', async () => {
      const { client } = ctx();
      const name = await ctx().create('twice');
      const raw = await ctx().raw('POST', '/v1/sandboxes', { json: { name } });
      const body = await raw.text();
      assert.ok(
        raw.status === 409 || (raw.status === 400 && /already exists/i.test(body)),
        `a second create answered ${raw.status} ${body}`,
      );
      const again = await client.create(name);
      assert.equal(again.adopted, true);
      assert.equal(again.sandbox.name, name);
      const matching = (await client.list()).filter((sandbox) => sandbox.name === name);
      assert.equal(matching.length, 1, 'adopting does not create a second sandbox');
      await client.destroy(name);
    });
  });

  describe('pagination', () => {
    it(
      'pages a list of more than 50 sandboxes with continuation_token until has_more is false',
      pageTimeout,
      async () => {
        const { client } = ctx();
        const names = Array.from({ length: 55 }, () => ctx().name('page'));
        try {
          await forEachLimited(names, 8, (name) => client.create(name));

          const first = await ctx().raw('GET', '/v1/sandboxes');
          assert.equal(first.status, 200);
          const page = (await first.json()) as Record<string, unknown>;
          assert.ok(Array.isArray(page['sandboxes']), 'a page carries `sandboxes`');
          assert.equal(page['has_more'], true, 'more than 50 sandboxes do not fit on one page');
          assert.equal(typeof page['next_continuation_token'], 'string');
          const firstPageSize = (page['sandboxes'] as unknown[]).length;

          const listed = (await client.list()).map((sandbox) => sandbox.name);
          assert.ok(
            firstPageSize > 0 && firstPageSize < listed.length,
            'the first page holds part of the list',
          );
          for (const name of names) assert.ok(listed.includes(name), `${name} is listed`);
          assert.equal(new Set(listed).size, listed.length, 'no sandbox appears on two pages');
        } finally {
          await forEachLimited(names, 8, (name) => client.destroy(name, { retry: true }));
        }
        const after = (await client.list()).map((sandbox) => sandbox.name);
        for (const name of names) assert.ok(!after.includes(name), `${name} is gone`);
      },
    );
  });
}
