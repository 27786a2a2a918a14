import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { watchEgressRefusals } from './egress-refusal.ts';

describe('watchEgressRefusals', () => {
  it('names the allowlist setting for a policy denial, without the host', () => {
    const watch = watchEgressRefusals();
    watch.feed(
      Buffer.from(
        'npm error 403 Forbidden (egress to registry.npmjs.org is denied by the sandbox network policy) - GET https://registry.npmjs.org/cowsay\n',
      ),
    );
    const hint = watch.hint() ?? '';
    assert.match(hint, /networking_config\.allowed_hosts/);
    assert.doesNotMatch(hint, /registry\.npmjs\.org/);
  });

  it('names SANDBOXD_EGRESS_ALLOW_CIDRS for a private address, also when the reason spans two chunks', () => {
    const watch = watchEgressRefusals();
    watch.feed(
      Buffer.from('E: Failed to fetch: 403 Forbidden (egress to deb.debian.org is refused: not a pu'),
    );
    watch.feed(Buffer.from('blic address)\n'));
    assert.match(watch.hint() ?? '', /SANDBOXD_EGRESS_ALLOW_CIDRS/);
  });

  it('says nothing for an install that failed for another reason', () => {
    const watch = watchEgressRefusals();
    watch.feed(Buffer.from('npm error 404 Not Found - GET https://registry.npmjs.org/no-such-package\n'));
    assert.equal(watch.hint(), null);
  });
});
