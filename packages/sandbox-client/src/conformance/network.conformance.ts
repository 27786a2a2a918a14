import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import type { NetworkPolicy } from '../types.ts';
import type { ConformanceContext, NetworkTarget } from './context.ts';

const defaultFetchCommand = (url: string): string[] => [
  'sh',
  '-c',
  'if command -v curl >/dev/null 2>&1; then exec curl -fsS --max-time 10 "$1"; ' +
    'else exec wget -q -T 10 -O - "$1"; fi',
  'fetch',
  url,
];

export function registerNetworkTests(
  ctx: () => ConformanceContext,
  network: NetworkTarget | undefined,
): void {
  describe('network policy', () => {
    let name = '';
    before(async () => {
      name = await ctx().create('net');
    });
    after(async () => {
      if (name) await ctx().client.destroy(name);
    });

    const setPolicyRaw = async (policy: NetworkPolicy): Promise<number> => {
      const response = await ctx().raw('POST', `/v1/sandboxes/${name}/policy/network`, { json: policy });
      await response.body?.cancel();
      return response.status;
    };

    it('answers exactly 204 to a policy with rules', async () => {
      assert.equal(
        await setPolicyRaw({
          rules: [
            { domain: 'example.test', action: 'allow' },
            { domain: '*', action: 'deny' },
          ],
        }),
        204,
      );
    });

    it('answers exactly 204 to an empty rule list (allow-all)', async () => {
      assert.equal(await setPolicyRaw({ rules: [] }), 204);
    });

    it('answers 404 for a missing sandbox', async () => {
      const response = await ctx().raw('POST', `/v1/sandboxes/${ctx().name('ghost')}/policy/network`, {
        json: { rules: [] },
      });
      await response.body?.cancel();
      assert.equal(response.status, 404);
    });

    if (!network) {
      // Enforcement needs host names the backend routes to a loopback server: see NetworkTarget.
      process.stderr.write(
        'conformance: network enforcement checks not registered (no `network` target given)\n',
      );
      return;
    }
    registerEnforcementTests(ctx, () => name, network);
  });
}

function registerEnforcementTests(
  ctx: () => ConformanceContext,
  sandbox: () => string,
  network: NetworkTarget,
): void {
  describe('enforcement by host name', () => {
    let server: Server | undefined;
    let port = 0;
    const hits = new Map<string, number>();
    before(async () => {
      server = createServer((request, response) => {
        const host = (request.headers.host ?? '').replace(/:\d+$/, '');
        hits.set(host, (hits.get(host) ?? 0) + 1);
        response.writeHead(200, { 'content-type': 'text/plain' }).end(`conformance-ok ${host}`);
      });
      if (network.serve) port = await network.serve(server);
      else {
        await new Promise<void>((resolve) => server?.listen(network.port ?? 0, '127.0.0.1', resolve));
        port = (server.address() as AddressInfo).port;
      }
    });
    after(async () => {
      server?.closeAllConnections();
      if (server?.listening) await new Promise<void>((resolve) => server?.close(() => resolve()));
    });

    const fetchFrom = async (host: string) => {
      const command = (network.fetchCommand ?? defaultFetchCommand)(`http://${host}:${port}/`);
      return ctx().client.exec(sandbox(), { cmd: command, timeoutMs: 60_000 });
    };
    const setPolicy = (policy: NetworkPolicy) => ctx().client.setNetworkPolicy(sandbox(), policy);

    it('lets through a host the policy allows and blocks the rest', async () => {
      await setPolicy({
        rules: [
          { domain: network.allowedHost, action: 'allow' },
          { domain: '*', action: 'deny' },
        ],
      });
      hits.clear();
      const allowed = await fetchFrom(network.allowedHost);
      assert.equal(allowed.exitCode, 0, `the allowed host is reachable: ${allowed.stderr.toString()}`);
      assert.equal(allowed.stdout.toString(), `conformance-ok ${network.allowedHost}`);

      const denied = await fetchFrom(network.deniedHost);
      assert.notEqual(denied.exitCode, 0, 'the denied host is not reachable');
      assert.equal(hits.get(network.deniedHost) ?? 0, 0, 'no request for the denied host reached the server');
    });

    it('blocks every host under a single `*` deny rule', async () => {
      await setPolicy({ rules: [{ domain: '*', action: 'deny' }] });
      hits.clear();
      const allowed = await fetchFrom(network.allowedHost);
      assert.notEqual(allowed.exitCode, 0);
      assert.equal(hits.size, 0);
    });

    it('lets every host through under an empty rule list', async () => {
      await setPolicy({ rules: [] });
      for (const host of [network.allowedHost, network.deniedHost]) {
        const result = await fetchFrom(host);
        assert.equal(result.exitCode, 0, `${host}: ${result.stderr.toString()}`);
        assert.equal(result.stdout.toString(), `conformance-ok ${host}`);
      }
    });

    it('applies a new policy to a sandbox at once', async () => {
      await setPolicy({ rules: [{ domain: '*', action: 'deny' }] });
      assert.notEqual((await fetchFrom(network.allowedHost)).exitCode, 0);
      await setPolicy({ rules: [{ domain: network.allowedHost, action: 'allow' }] });
      assert.equal((await fetchFrom(network.allowedHost)).exitCode, 0);
    });
  });
}
