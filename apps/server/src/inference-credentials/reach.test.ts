// reach.ts on names: judged by what they resolve to (the lookup is a parameter here; the HTTP
// test covers addresses, localhost and routes through the real app).
import assert from 'node:assert/strict';
import { networkInterfaces } from 'node:os';
import { describe, it } from 'node:test';
import { createGatewayReach, sandboxdOnThisHost } from './reach.ts';

const reach = (addresses: Record<string, string[]>) =>
  createGatewayReach(
    {
      serviceRoutes: [],
      egressAllowCidrs: [{ address: '10.30.0.0', prefix: 16, family: 'ipv4' }],
    },
    { sandboxdOnThisHost: false, resolve: async (host) => addresses[host] ?? [] },
  );

describe('gateway reach of a name', () => {
  it('is refused when every address it resolves to is refused, and says which address', async () => {
    const r = reach({ 'gw.lan': ['192.168.1.5'], 'me.lan': ['127.0.1.1'], 'both.lan': ['::1', '10.9.9.9'] });
    assert.match(
      (await r.problem('http://both.lan:4000')) ?? '',
      /both\.lan \(10\.9\.9\.9\): it is a private address/,
    );
    assert.match(
      (await r.problem('http://169.254.169.254')) ?? '',
      /link-local, multicast and unspecified addresses are never dialled/,
    );
    assert.match(
      (await r.problem('http://gw.lan:4000')) ?? '',
      /no sandbox can reach gw\.lan \(192\.168\.1\.5\)/,
    );
    assert.match(
      (await r.problem('http://me.lan:4000')) ?? '',
      /me\.lan \(127\.0\.1\.1\): it is this machine/,
    );
  });

  it('is accepted when one address is dialled, when the range is opened, or when it does not resolve here', async () => {
    const r = reach({ 'mixed.example': ['10.9.9.9', '93.184.215.14'], 'opened.lan': ['10.30.1.2'] });
    assert.equal(await r.problem('https://mixed.example'), null);
    assert.equal(await r.problem('http://opened.lan:8000'), null);
    assert.equal(await r.problem('http://nowhere.test:8000'), null);
  });

  it('names the service route the operator declared for the address, instead of asking for one', async () => {
    const r = createGatewayReach(
      { serviceRoutes: [{ name: 'gateway.internal', ip: '127.0.0.1', port: 4555 }], egressAllowCidrs: [] },
      { sandboxdOnThisHost: false, resolve: async () => [] },
    );
    assert.equal(
      await r.problem('http://127.0.0.1:4555/v1'),
      'no sandbox can reach 127.0.0.1 directly; the operator routes gateway.internal to it: use http://gateway.internal:4555/v1',
    );
    // Another port of the same address has no route: the operator is asked for one.
    assert.match((await r.problem('http://127.0.0.1:4556')) ?? '', /declares a service route/);
    assert.equal(await r.problem('http://gateway.internal:4555/v1'), null);
  });

  it("counts this host's own addresses as loopback when sandboxd runs here", async () => {
    const own = Object.values(networkInterfaces())
      .flatMap((list) => list ?? [])
      .find((i) => i.family === 'IPv4' && !i.internal)?.address;
    assert.ok(own, 'this host has a non-loopback IPv4 address');
    const opened = { address: own, prefix: 32, family: 'ipv4' as const };
    const judge = (sandboxdHere: boolean) =>
      createGatewayReach(
        { serviceRoutes: [], egressAllowCidrs: [opened] },
        { sandboxdOnThisHost: sandboxdHere, resolve: async () => [] },
      ).problem(`http://${own}:4000`);
    assert.match((await judge(true)) ?? '', /it is this machine/);
    assert.equal(await judge(false), null);
    assert.equal(sandboxdOnThisHost('http://127.0.0.1:7070'), true);
    assert.equal(sandboxdOnThisHost('http://[::1]:7070'), true);
    assert.equal(sandboxdOnThisHost('https://sandboxd.example.com'), false);
    assert.equal(sandboxdOnThisHost(undefined), false);
  });
});
