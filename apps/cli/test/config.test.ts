import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isSafeTransport, normalizeUrl } from '../src/config.ts';

describe('server URL', () => {
  it('counts https and plain http to this machine as safe for credentials, other http not', () => {
    assert.equal(isSafeTransport('https://paddock.example.com'), true);
    assert.equal(isSafeTransport('http://localhost:4000'), true);
    assert.equal(isSafeTransport('http://127.0.0.1:4000'), true);
    assert.equal(isSafeTransport('http://[::1]:4000'), true);
    assert.equal(isSafeTransport('http://paddock.example.com'), false);
    assert.equal(isSafeTransport('http://10.0.0.5:4000'), false);
  });

  it('normalizes to an origin plus path without a trailing slash, refusing other schemes', () => {
    assert.equal(normalizeUrl('https://paddock.example.com/'), 'https://paddock.example.com');
    assert.throws(() => normalizeUrl('ftp://x'), /http/);
    assert.throws(() => normalizeUrl('not a url'), /not a URL/);
  });
});
