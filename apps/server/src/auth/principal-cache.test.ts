import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Principal } from './principal.ts';
import { createPrincipalCache } from './principal-cache.ts';

function principal(over: Partial<Principal> = {}): Principal {
  return {
    userId: 'u1',
    tenantId: 'u1',
    email: 'a@example.com',
    isAdmin: false,
    via: 'api_key',
    apiKeyId: 'k1',
    sessionId: null,
    scope: 'full',
    conversationId: null,
    ...over,
  };
}

describe('principal cache', () => {
  it('serves an entry until its time to live runs out', () => {
    let now = 1000;
    const cache = createPrincipalCache({ ttlMs: 2000, now: () => now });
    cache.set('h', principal(), cache.epoch());
    assert.equal(cache.get('h')?.apiKeyId, 'k1');
    now += 1999;
    assert.ok(cache.get('h'));
    now += 1;
    assert.equal(cache.get('h'), undefined);
  });

  it('never serves a key past its own expiry', () => {
    let now = 1000;
    const cache = createPrincipalCache({ ttlMs: 2000, now: () => now });
    cache.set('h', principal(), cache.epoch(), 1500);
    now = 1499;
    assert.ok(cache.get('h'));
    now = 1500;
    assert.equal(cache.get('h'), undefined);
  });

  it('forgets matching entries at once', () => {
    const cache = createPrincipalCache();
    cache.set('a', principal({ apiKeyId: 'k1', userId: 'u1' }), cache.epoch());
    cache.set('b', principal({ apiKeyId: 'k2', userId: 'u2' }), cache.epoch());
    cache.forget((p) => p.userId === 'u1');
    assert.equal(cache.get('a'), undefined);
    assert.equal(cache.get('b')?.apiKeyId, 'k2');
  });

  it('never lets a lookup that started before a revocation repopulate the cache', () => {
    const cache = createPrincipalCache();
    const startedAt = cache.epoch();
    // ... the database read is in flight while the key is revoked ...
    cache.forget((p) => p.apiKeyId === 'k1');
    cache.set('a', principal({ apiKeyId: 'k1' }), startedAt);
    assert.equal(cache.get('a'), undefined);
  });

  it('stays bounded, dropping the oldest entry', () => {
    const cache = createPrincipalCache({ maxEntries: 2 });
    cache.set('a', principal(), cache.epoch());
    cache.set('b', principal(), cache.epoch());
    cache.set('c', principal(), cache.epoch());
    assert.equal(cache.get('a'), undefined);
    assert.ok(cache.get('b'));
    assert.ok(cache.get('c'));
  });
});
