// A credential set or changed while the sandbox is warm applies to it completely before the next
// turn (issue 37, finding 2): in a `limited` environment the egress policy allows the new base
// URL's host, not only the env. Real sandboxd and its egress proxy; two gateways on loopback,
// reached by the service-route names the operator declared (SANDBOXD_SERVICE_ROUTES).
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { type ConversationHarness, startConversationHarness } from './helpers/conversations.ts';

/** A gateway on loopback that answers every request with its own name. */
async function gateway(name: string): Promise<{ port: number; close(): Promise<void> }> {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(name);
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  server.unref();
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((ok) => server.close(() => ok())),
  };
}

let h: ConversationHarness;
let a: Awaited<ReturnType<typeof gateway>>;
let b: Awaited<ReturnType<typeof gateway>>;
before(async () => {
  a = await gateway('gateway-a');
  b = await gateway('gateway-b');
  const routes = `gateway-a.test=127.0.0.1:${a.port} gateway-b.test=127.0.0.1:${b.port}`;
  h = await startConversationHarness({
    sandboxdEnv: { SANDBOXD_SERVICE_ROUTES: routes },
    env: { SANDBOXD_SERVICE_ROUTES: routes },
  });
});
after(async () => {
  await h?.close();
  await a?.close();
  await b?.close();
});

describe('a credential changed while the sandbox is warm, limited environment', () => {
  test('no credential, then one on gateway A, then one on gateway B: each next turn reaches its gateway', async () => {
    const user = await h.user();
    const env = await h.environment(user, {
      networking_type: 'limited',
      networking_config: { allowed_hosts: [] },
    });
    const agent = await h.agent(user, { environment_id: env });
    // What the gateway of the env's base URL answers, through the egress proxy, and its status.
    const prompt =
      'if [ -n "${ANTHROPIC_BASE_URL:-}" ]; then curl -s -w " %{http_code}" "$ANTHROPIC_BASE_URL/v1/models"; else printf none; fi; echo';
    const conv = await h.start(user, { agent_id: agent, prompt });
    const turn = async (seq: number) => {
      const ended = await h.waitForTurn(user, conv.id, seq, 60_000);
      assert.equal(ended.status, 'succeeded');
      return (await h.stdout(conv.id)).split('\n')[seq - 1] ?? '';
    };
    const setTo = async (port: number, host: string) => {
      const put = await h.api(user, 'PUT', '/api/account/inference-credentials/anthropic', {
        api_key: 'sk-ant-egress-follows-key-Qv3Rt8',
        base_url: `http://${host}:${port}`,
      });
      assert.equal(put.status, 200, JSON.stringify(put.body));
      assert.equal(
        (await h.api(user, 'POST', `/api/conversations/${conv.id}/prompts`, { prompt })).status,
        202,
      );
    };

    assert.equal(await turn(1), 'none');
    await setTo(a.port, 'gateway-a.test');
    assert.equal(await turn(2), 'gateway-a 200');
    await setTo(b.port, 'gateway-b.test');
    assert.equal(await turn(3), 'gateway-b 200');

    // The same sandbox all along: its env and policy were refreshed, it was not provisioned again.
    const stages = (await h.events(conv.id)).filter((e) => e.stream === 'stage' && e.state === 'started');
    assert.equal(stages.filter((e) => e.stage === 'provision').length, 1);
    await h.api(user, 'DELETE', `/api/conversations/${conv.id}`);
  });
});
