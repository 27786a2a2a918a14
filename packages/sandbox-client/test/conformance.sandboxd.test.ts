// The conformance suite against a real sandboxd started for this file (part of `npm test`).
// The suite's server accepts in a test network namespace (sandboxd refuses loopback and the
// host's own addresses), whose private range SANDBOXD_EGRESS_ALLOW_CIDRS opens; the
// test-hosts override routes allowed.test and denied.test to it, so network-policy
// enforcement is checked end to end.
import { after, before } from 'node:test';
import { startTestSandboxd, type TestSandboxd } from '../../../apps/sandboxd/test/harness.ts';
import { createTestNet, type TestNet } from '../../../apps/sandboxd/test/netns.ts';
import { runConformanceSuite } from '../src/conformance/index.ts';

let sandboxd: TestSandboxd | undefined;
let tnet: TestNet | undefined;

before(async () => {
  tnet = await createTestNet();
  sandboxd = await startTestSandboxd({
    net: tnet,
    hosts: { 'allowed.test': tnet.ip, 'denied.test': tnet.ip },
    env: { SANDBOXD_EGRESS_ALLOW_CIDRS: tnet.allowEnv },
  });
});
after(async () => {
  await sandboxd?.stop();
  tnet?.close();
});

runConformanceSuite(
  () => {
    if (!sandboxd) throw new Error('sandboxd did not start');
    return { baseUrl: sandboxd.url, token: sandboxd.token };
  },
  {
    network: {
      allowedHost: 'allowed.test',
      deniedHost: 'denied.test',
      async serve(server) {
        if (!tnet) throw new Error('the test network was not created');
        const { server: listener, port } = await tnet.listen();
        listener.on('connection', (socket) => server.emit('connection', socket));
        return port;
      },
    },
  },
);
