import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ConfigError, loadConfig, parseBytes, parseHostsFile } from '../src/config.ts';
import { AppError } from '../src/errors.ts';
import { compilePolicy, DEFAULT_ALLOWED_HOSTS, parseRules } from '../src/proxy/policy.ts';

describe('network policy resolution', () => {
  it('allows everything when the rules list is empty (no enforcement)', () => {
    const p = compilePolicy([]);
    assert.equal(p.enforcing, false);
    assert.equal(p.decide('anything.example'), 'allow');
    assert.equal(p.decide('10.1.2.3'), 'allow');
  });

  it('denies everything for a limited environment: a single * deny rule', () => {
    const p = compilePolicy([{ domain: '*', action: 'deny' }]);
    for (const h of ['github.com', 'registry.npmjs.org', 'api.anthropic.com', 'x.test'])
      assert.equal(p.decide(h), 'deny');
  });

  it('lets the most specific rule win: exact > *.suffix > *', () => {
    const p = compilePolicy([
      { domain: '*', action: 'allow' },
      { domain: '*.example.com', action: 'deny' },
      { domain: '*.api.example.com', action: 'allow' },
      { domain: 'secret.api.example.com', action: 'deny' },
    ]);
    assert.equal(p.decide('other.org'), 'allow');
    assert.equal(p.decide('www.example.com'), 'deny');
    assert.equal(p.decide('v1.api.example.com'), 'allow');
    assert.equal(p.decide('secret.api.example.com'), 'deny');
    assert.equal(p.decide('SECRET.API.EXAMPLE.COM.'), 'deny');
  });

  it('does not match the apex with *.suffix, and denies unmatched hosts while enforcing', () => {
    const p = compilePolicy([{ domain: '*.example.com', action: 'allow' }]);
    assert.equal(p.decide('a.example.com'), 'allow');
    assert.equal(p.decide('example.com'), 'deny');
    assert.equal(p.decide('example.org'), 'deny');
  });

  it('adds the documented defaults preset with include: "defaults", explicit rules beating it', () => {
    const p = compilePolicy([
      { domain: '*', action: 'deny', include: 'defaults' },
      { domain: 'gitlab.com', action: 'deny' },
    ]);
    assert.equal(p.decide('registry.npmjs.org'), 'allow');
    assert.equal(p.decide('github.com'), 'allow');
    assert.equal(p.decide('raw.githubusercontent.com'), 'allow');
    assert.equal(p.decide('api.anthropic.com'), 'allow');
    assert.equal(p.decide('pypi.org'), 'allow');
    assert.equal(p.decide('gitlab.com'), 'deny');
    assert.equal(p.decide('evil.example'), 'deny');
    assert.ok(DEFAULT_ALLOWED_HOSTS.includes('api.openai.com'));
    // Without include the preset is not there.
    assert.equal(compilePolicy([{ domain: 'example.com', action: 'allow' }]).decide('github.com'), 'deny');
  });

  it('refuses literal IP addresses while enforcing, even under *', () => {
    const p = compilePolicy([{ domain: '*', action: 'allow' }]);
    assert.equal(p.decide('93.184.216.34'), 'deny');
    assert.equal(p.decide('[2001:db8::1]'), 'deny');
    assert.equal(p.decide('example.com'), 'allow');
  });

  it('validates rule bodies', () => {
    assert.deepEqual(parseRules({ rules: [] }), []);
    assert.deepEqual(parseRules({ rules: [{ domain: 'GitHub.com', action: 'allow' }] }), [
      { domain: 'github.com', action: 'allow' },
    ]);
    assert.deepEqual(parseRules({ rules: [{ action: 'allow', include: 'defaults' }] }), [
      { action: 'allow', include: 'defaults' },
    ]);
    for (const bad of [
      null,
      {},
      { rules: 'x' },
      { rules: [{ domain: 'a.com', action: 'maybe' }] },
      { rules: [{ domain: 'a b', action: 'allow' }] },
      { rules: [{ domain: 'a.com', action: 'allow', include: 'everything' }] },
      { rules: [{ action: 'deny' }] },
    ]) {
      assert.throws(
        () => parseRules(bad),
        (e: unknown) => e instanceof AppError && e.status === 400,
        JSON.stringify(bad),
      );
    }
  });
});

describe('configuration', () => {
  const base = { SANDBOXD_TOKEN: 't' };
  it('refuses to start without SANDBOXD_TOKEN, naming it', () => {
    assert.throws(
      () => loadConfig({}),
      (e: unknown) => e instanceof ConfigError && e.message.includes('SANDBOXD_TOKEN'),
    );
    assert.throws(() => loadConfig({ SANDBOXD_TOKEN: '  ' }), /SANDBOXD_TOKEN/);
  });

  it('applies documented defaults and treats blank values as unset', () => {
    const c = loadConfig({ ...base, SANDBOXD_ADDR: '', SANDBOXD_MEMORY_MAX: ' ' }, '/srv');
    assert.equal(c.host, '127.0.0.1');
    assert.equal(c.port, 7070);
    assert.equal(c.dataDir, '/srv/.paddock/sandboxd');
    assert.equal(c.limits.memoryBytes, 4 * 1024 ** 3);
    assert.equal(c.limits.pidsMax, 2048);
    assert.equal(c.limits.cpus, 2);
    assert.equal(c.sessionBufferBytes, 16 * 1024 * 1024);
    assert.equal(c.rootfs, undefined);
    assert.deepEqual(c.egressAllow, []);
    assert.deepEqual(c.proxy, { connectionsMax: 256, handshakeTimeoutMs: 10_000, idleTimeoutMs: 300_000 });
  });

  it('SANDBOXD_RUNTIME_LAYER: auto by default (blank too), off, or a directory; anything else refuses to start, naming it', () => {
    assert.deepEqual(loadConfig(base).runtimeLayer, { mode: 'auto' });
    assert.deepEqual(loadConfig({ ...base, SANDBOXD_RUNTIME_LAYER: ' ' }).runtimeLayer, { mode: 'auto' });
    assert.deepEqual(loadConfig({ ...base, SANDBOXD_RUNTIME_LAYER: 'auto' }).runtimeLayer, { mode: 'auto' });
    assert.deepEqual(loadConfig({ ...base, SANDBOXD_RUNTIME_LAYER: 'off' }).runtimeLayer, { mode: 'off' });
    assert.deepEqual(loadConfig({ ...base, SANDBOXD_RUNTIME_LAYER: '/var/cache/layers' }).runtimeLayer, {
      mode: 'dir',
      dir: '/var/cache/layers',
    });
    assert.deepEqual(loadConfig({ ...base, SANDBOXD_RUNTIME_LAYER: './layers' }, '/srv').runtimeLayer, {
      mode: 'dir',
      dir: '/srv/layers',
    });
    for (const bad of ['Off', 'true', 'layers', 'aut0']) {
      assert.throws(
        () => loadConfig({ ...base, SANDBOXD_RUNTIME_LAYER: bad }),
        (e: unknown) => e instanceof ConfigError && e.message.includes('SANDBOXD_RUNTIME_LAYER'),
        bad,
      );
    }
  });

  it('SANDBOXD_SERVICE_ROUTES: name=ip:port entries; malformed entries refuse to start, naming the variable', () => {
    const c = loadConfig({
      ...base,
      SANDBOXD_SERVICE_ROUTES: 'paddock.internal=127.0.0.1:4000, API.Example.test=[::1]:8443',
    });
    assert.deepEqual(
      [...c.serviceRoutes],
      [
        ['paddock.internal', { ip: '127.0.0.1', port: 4000 }],
        ['api.example.test', { ip: '::1', port: 8443 }],
      ],
    );
    assert.equal(loadConfig({ ...base, SANDBOXD_SERVICE_ROUTES: ' ' }).serviceRoutes.size, 0);
    for (const bad of [
      'paddock.internal',
      'paddock.internal=127.0.0.1',
      'x=127.0.0.1:80',
      'p.i=localhost:80',
      'p.i=1.2.3.4:0',
      'p.i=1.2.3.4:70000',
    ]) {
      assert.throws(
        () => loadConfig({ ...base, SANDBOXD_SERVICE_ROUTES: bad }),
        /SANDBOXD_SERVICE_ROUTES/,
        bad,
      );
    }
  });

  it('refuses malformed values, naming the variable', () => {
    for (const [k, v] of [
      ['SANDBOXD_ADDR', 'nope'],
      ['SANDBOXD_MEMORY_MAX', 'lots'],
      ['SANDBOXD_PIDS_MAX', '-1'],
      ['SANDBOXD_CPUS', 'two'],
      ['SANDBOXD_SESSION_BUFFER_MB', '0'],
      ['SANDBOXD_LOG_LEVEL', 'loud'],
      ['SANDBOXD_LOG_FORMAT', 'xml'],
      ['SANDBOXD_HOSTS_FILE', '/nonexistent/hosts'],
      ['SANDBOXD_EGRESS_ALLOW_CIDRS', '10.0.0.0/33'],
      ['SANDBOXD_EGRESS_ALLOW_CIDRS', '10.0.0/8'],
      ['SANDBOXD_EGRESS_ALLOW_CIDRS', 'intranet'],
      ['SANDBOXD_EGRESS_ALLOW_CIDRS', '10.0.0.0/8, 127.0.0.0/8'],
      ['SANDBOXD_EGRESS_ALLOW_CIDRS', '0.0.0.0/0'],
      ['SANDBOXD_EGRESS_ALLOW_CIDRS', '169.254.169.254'],
      ['SANDBOXD_EGRESS_ALLOW_CIDRS', 'fe80::/64'],
      ['SANDBOXD_PROXY_CONNECTIONS_MAX', '0'],
      ['SANDBOXD_PROXY_HANDSHAKE_TIMEOUT', '1.5'],
      ['SANDBOXD_PROXY_IDLE_TIMEOUT', 'forever'],
    ] as const) {
      assert.throws(
        () => loadConfig({ ...base, [k]: v }),
        (e: unknown) => e instanceof ConfigError && e.message.includes(k),
        k,
      );
    }
  });

  it('parses sizes, addresses, token lists and hosts files', () => {
    assert.equal(parseBytes('X', '512m'), 512 * 1024 ** 2);
    assert.equal(parseBytes('X', '1.5g'), 1.5 * 1024 ** 3);
    assert.equal(parseBytes('X', '0'), 0);
    const c = loadConfig({ SANDBOXD_TOKEN: 'a, b', SANDBOXD_ADDR: '0.0.0.0:0' });
    assert.deepEqual(c.tokens, ['a', 'b']);
    assert.equal(c.port, 0);
    const hosts = parseHostsFile('# test\n127.0.0.1 Allowed.test denied.test\n\n::1 six.test # v6\n');
    assert.equal(hosts.get('allowed.test'), '127.0.0.1');
    assert.equal(hosts.get('denied.test'), '127.0.0.1');
    assert.equal(hosts.get('six.test'), '::1');
  });

  it('parses the egress allow list and the proxy limits', () => {
    const c = loadConfig({
      ...base,
      SANDBOXD_EGRESS_ALLOW_CIDRS: '10.20.0.0/16, fd12:3456::/48 192.168.1.7',
      SANDBOXD_PROXY_CONNECTIONS_MAX: '32',
      SANDBOXD_PROXY_HANDSHAKE_TIMEOUT: '3',
      SANDBOXD_PROXY_IDLE_TIMEOUT: '60',
    });
    assert.deepEqual(
      c.egressAllow.map((x) => `${x.text} ${x.bits}`),
      ['10.20.0.0/16 16', 'fd12:3456::/48 48', '192.168.1.7 32'],
    );
    assert.deepEqual(c.proxy, { connectionsMax: 32, handshakeTimeoutMs: 3000, idleTimeoutMs: 60_000 });
    assert.deepEqual(loadConfig({ ...base, SANDBOXD_EGRESS_ALLOW_CIDRS: ' ' }).egressAllow, []);
  });
});
