import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { rateLimitKey } from './rate-limit-key.ts';

describe('rate-limit bucket of a client address', () => {
  it('is the address itself for IPv4, also when IPv4-mapped', () => {
    assert.equal(rateLimitKey('198.51.100.7'), '198.51.100.7');
    assert.equal(rateLimitKey('::ffff:198.51.100.7'), '198.51.100.7');
    assert.equal(rateLimitKey('::FFFF:198.51.100.7'), '198.51.100.7');
  });

  it('is the /64 network for IPv6, however the address is written', () => {
    const key = rateLimitKey('2001:db8:1:2::1');
    assert.equal(key, '2001:db8:1:2::/64');
    assert.equal(rateLimitKey('2001:0db8:0001:0002:ffff:ffff:ffff:ffff'), key);
    assert.equal(rateLimitKey('2001:db8:1:2:aaaa::'), key);
    assert.equal(rateLimitKey('2001:db8:1:2:0:0:1.2.3.4'), key);
    assert.notEqual(rateLimitKey('2001:db8:1:3::1'), key);
    assert.equal(rateLimitKey('::1'), '0:0:0:0::/64');
    assert.equal(rateLimitKey('fe80::1%eth0'), 'fe80:0:0:0::/64');
  });

  it('passes anything else through unchanged', () => {
    assert.equal(rateLimitKey('not-an-ip'), 'not-an-ip');
  });
});
