// freePort (embedded.ts): a port a listener can take a little later, never one the kernel hands
// out for outgoing connections meanwhile.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { describe, it } from 'node:test';
import { freePort } from './embedded.ts';

describe('freePort', () => {
  it('picks a port below the ephemeral range that a listener can then bind', async () => {
    const [low] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
      .trim()
      .split(/\s+/)
      .map(Number);
    for (let i = 0; i < 20; i++) {
      const port = await freePort();
      assert.ok(port >= 10_000 && port < (low ?? 32768), `port ${port}`);
      const srv = createServer();
      await new Promise<void>((resolve, reject) => {
        srv.once('error', reject);
        srv.listen(port, '127.0.0.1', resolve);
      });
      await new Promise((resolve) => srv.close(resolve));
    }
  });
});
