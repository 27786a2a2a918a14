// Runs the conformance suite against any backend that speaks the sandbox interface:
//
//   SANDBOX_BASE_URL=https://backend.example SANDBOX_TOKEN=... \
//     /work/main/node_modules/.bin/node --test packages/sandbox-client/test/conformance.external.ts
//
// Network-policy enforcement checks run when the backend routes two host names to
// 127.0.0.1 on this machine: set CONFORMANCE_ALLOWED_HOST and CONFORMANCE_DENIED_HOST
// (and CONFORMANCE_NETWORK_PORT if the routing is bound to a fixed port).
//
// The file is named without `.test.ts` so `npm test` does not pick it up: without a
// target it would have nothing to check.
import { runConformanceSuite } from '../src/conformance/index.ts';

const baseUrl = process.env['SANDBOX_BASE_URL'];
const token = process.env['SANDBOX_TOKEN'];
if (!baseUrl || !token) {
  process.stderr.write('conformance.external: set SANDBOX_BASE_URL and SANDBOX_TOKEN; no tests registered\n');
  process.exitCode = 1;
} else {
  const allowedHost = process.env['CONFORMANCE_ALLOWED_HOST'];
  const deniedHost = process.env['CONFORMANCE_DENIED_HOST'];
  const port = process.env['CONFORMANCE_NETWORK_PORT'];
  runConformanceSuite(
    { baseUrl, token },
    allowedHost && deniedHost
      ? { network: { allowedHost, deniedHost, ...(port ? { port: Number(port) } : {}) } }
      : {},
  );
}
