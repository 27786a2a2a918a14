// Issue 14, finding 7, written as the attack: credential parameters whose names are
// percent-encoded or differently cased must still be redacted in every log line.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { redactUrl } from '../src/observability/logger.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';

let t: TestApp;
before(async () => {
  t = await buildTestApp();
});
after(async () => {
  await t.close();
});

describe('log redaction of credentials in URLs (finding 7)', () => {
  const spellings = ['%74oken', 'TOKEN', 'to%6Ben', 'ToKeN', '%54%4F%4B%45%4E', 'code', 'C%4FDE', 'state'];

  for (const name of spellings) {
    it(`keeps the value of ?${name}= out of every log line`, async () => {
      const sentinel = `s3cr3t${name.replaceAll('%', '')}${Date.now()}`;
      const before = t.logs.length;
      await t.app.inject({ method: 'GET', url: `/auth/verify?${name}=${sentinel}&keep=1` });
      await t.app.inject({ method: 'GET', url: `/api/no-such-route?x=1&${name}=${sentinel}` });
      await t.app.inject({ method: 'POST', url: `/api/auth/login?${name}=${sentinel}`, payload: '{' });
      const lines = t.logs.slice(before);
      assert.ok(
        lines.some((l) => l.includes(`${name}=[redacted]`)),
        'the request was logged with its parameter redacted',
      );
      assert.ok(
        !lines.some((l) => l.includes(sentinel)),
        `a credential reached a log line: ${lines.join('')}`,
      );
    });
  }

  it('redacts by decoded, case-folded name and leaves other parameters alone', () => {
    assert.equal(redactUrl('/auth/verify?%74oken=abc&x=1'), '/auth/verify?%74oken=[redacted]&x=1');
    assert.equal(redactUrl('/a?TOKEN=abc'), '/a?TOKEN=[redacted]');
    assert.equal(redactUrl('/a?to%6Ben=abc#frag'), '/a?to%6Ben=[redacted]#[redacted]');
    assert.equal(redactUrl('/a?tokens=abc&page=2'), '/a?tokens=abc&page=2');
    // A name that does not decode could be anything: its value is redacted too.
    assert.equal(redactUrl('/a?%ZZ=abc'), '/a?%ZZ=[redacted]');
    assert.equal(redactUrl('/a/b'), '/a/b');
  });
});
