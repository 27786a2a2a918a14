// The conformance suite against a real sandboxd started for this file (part of `npm test`).
// The test-hosts override routes allowed.test and denied.test to the suite's loopback
// server, so network-policy enforcement is checked end to end.
import { after, before } from 'node:test';
import { startTestSandboxd, type TestSandboxd } from '../../../apps/sandboxd/test/harness.ts';
import { runConformanceSuite } from '../src/conformance/index.ts';

let sandboxd: TestSandboxd | undefined;

before(async () => {
  sandboxd = await startTestSandboxd({ hosts: { 'allowed.test': '127.0.0.1', 'denied.test': '127.0.0.1' } });
});
after(async () => {
  await sandboxd?.stop();
});

runConformanceSuite(
  () => {
    if (!sandboxd) throw new Error('sandboxd did not start');
    return { baseUrl: sandboxd.url, token: sandboxd.token };
  },
  { network: { allowedHost: 'allowed.test', deniedHost: 'denied.test' } },
);
