import assert from 'node:assert/strict';
import type os from 'node:os';
import { describe, it } from 'node:test';
import { createEgressGuard, HOST_ADDRESSES_TTL_MS, parseAllowList } from '../src/proxy/addresses.ts';

// The attacks end to end (through a real sandbox and proxy) are in security.egress.test.ts; these pin the
// address classification itself, with a host whose interfaces are given.
const iface = (address: string): os.NetworkInterfaceInfo =>
  ({ address, family: address.includes(':') ? 'IPv6' : 'IPv4' }) as os.NetworkInterfaceInfo;
const HOST = { lo: [iface('127.0.0.1'), iface('::1')], eth0: [iface('203.0.113.9'), iface('2a01:4f8::9')] };

describe('egress destination addresses', () => {
  const guard = createEgressGuard({ allow: [], interfaces: () => HOST });

  it('refuses loopback, unspecified, link-local (metadata), multicast and broadcast in every form', () => {
    for (const ip of [
      '127.0.0.1',
      '127.1.2.3',
      '0.0.0.0',
      '0.1.2.3',
      '169.254.169.254',
      '224.0.0.1',
      '255.255.255.255',
      '::1',
      '::',
      'fe80::1',
      'fe80::1%eth0',
      'ff02::1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '0:0:0:0:0:ffff:7f00:0001',
      '::127.0.0.1',
      '::ffff:0:127.0.0.1',
      '64:ff9b::127.0.0.1',
      '64:ff9b::a9fe:a9fe',
      '2002:7f00:1::1',
      '[::1]',
      'not-an-ip',
    ]) {
      assert.equal(guard.permits(ip), false, ip);
    }
  });

  it("refuses the host's own addresses, v4 and v6, also in IPv4-mapped and NAT64 forms", () => {
    for (const ip of [
      '203.0.113.9',
      '2a01:4f8::9',
      '2a01:04f8:0::0009',
      '::ffff:203.0.113.9',
      '64:ff9b::cb00:7109',
    ])
      assert.equal(guard.permits(ip), false, ip);
    assert.equal(guard.permits('2a01:4f8::10'), true);
  });

  it('refuses private and other non-global ranges, in every form', () => {
    for (const ip of [
      '10.0.0.1',
      '172.16.5.4',
      '172.31.255.255',
      '192.168.1.1',
      '100.64.0.1',
      '100.127.255.254',
      '198.18.0.1',
      'fd00::1',
      'fc00::1',
      '::ffff:10.0.0.1',
      '::ffff:a00:1',
      '64:ff9b::10.1.2.3',
      '2002:c0a8:101::1',
      '2001:db8::1',
    ]) {
      assert.equal(guard.permits(ip), false, ip);
    }
  });

  it('permits public addresses', () => {
    for (const ip of ['93.184.216.34', '172.32.0.1', '100.128.0.1', '2606:4700::1', '::ffff:93.184.216.34'])
      assert.equal(guard.permits(ip), true, ip);
  });

  it('opens only the private ranges the operator lists, never the host itself', () => {
    const opened = createEgressGuard({
      allow: parseAllowList('10.20.0.0/16,fd12::/16,203.0.113.0/24'),
      interfaces: () => HOST,
    });
    assert.equal(opened.permits('10.20.3.4'), true);
    assert.equal(opened.permits('::ffff:10.20.3.4'), true);
    assert.equal(opened.permits('fd12::5'), true);
    assert.equal(opened.permits('10.21.0.1'), false);
    assert.equal(opened.permits('fd13::5'), false);
    assert.equal(opened.permits('203.0.113.10'), true);
    assert.equal(opened.permits('203.0.113.9'), false, 'a host address stays refused inside an opened range');
  });

  it('refuses an allow list that would open loopback, link-local, multicast or everything', () => {
    for (const bad of [
      '127.0.0.0/8',
      '0.0.0.0/0',
      '::/0',
      '::1',
      '169.254.0.0/16',
      'fe80::/10',
      '224.0.0.0/3',
    ])
      assert.throws(() => parseAllowList(bad), /never be opened/, bad);
    for (const bad of ['10.0.0.0/33', 'fd00::/129', 'intranet', '10.0.0.0/', '10.0.0/8', 'fe80::1%eth0'])
      assert.throws(() => parseAllowList(bad), /not an IPv4 or IPv6 CIDR/, bad);
  });

  it('re-reads the host addresses: one added after start is refused once the cache expires', () => {
    let t = 0;
    const ifaces: Record<string, os.NetworkInterfaceInfo[]> = { lo: [iface('127.0.0.1')] };
    const g = createEgressGuard({ allow: [], interfaces: () => ifaces, now: () => t });
    assert.equal(g.permits('198.51.99.7'), true);
    ifaces['eth1'] = [iface('198.51.99.7')];
    t += HOST_ADDRESSES_TTL_MS;
    assert.equal(g.permits('198.51.99.7'), false);
  });
});
