// Issue 14, finding 10, written as the attack: requests that fail before routing must still
// answer with the API's error shape, the security headers, a request id and (when routed)
// the rate limit, and never echo the URL. Sent over a raw socket: these are requests no
// well-behaved HTTP client would send.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { buildTestApp, type TestApp } from './helpers/app.ts';

const SENTINEL = 'zzsentinelzz';

let t: TestApp;
let port: number;
before(async () => {
  t = await buildTestApp({ env: { RATE_LIMIT_MAX: '5' } });
  port = Number(new URL(await t.app.listen({ host: '127.0.0.1', port: 0 })).port);
});
after(async () => {
  await t.close();
});

interface RawAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Writes `text` to a fresh connection and parses the one answer. */
function raw(text: string): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(text));
    let data = '';
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => {
      data += d;
    });
    socket.on('error', reject);
    socket.on('close', () => {
      const split = data.indexOf('\r\n\r\n');
      const [statusLine = '', ...headerLines] = data.slice(0, split).split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of headerLines) {
        const colon = line.indexOf(':');
        headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
      }
      resolve({ status: Number(statusLine.split(' ')[1]), headers, body: data.slice(split + 4) });
    });
    setTimeout(() => socket.end(), 2000).unref();
  });
}

const get = (target: string, extra = '') =>
  raw(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\n${extra}Connection: close\r\n\r\n`);

function assertApiAnswer(a: RawAnswer, status: number, code: string, options: { rateLimited: boolean }) {
  assert.equal(a.status, status, a.body);
  const body = JSON.parse(a.body) as Record<string, unknown>;
  assert.deepEqual(Object.keys(body).sort(), ['error', 'message']);
  assert.equal(body['error'], code);
  assert.ok(!a.body.includes(SENTINEL), `the URL was echoed: ${a.body}`);
  assert.match(a.headers['x-request-id'] ?? '', /^[0-9a-f-]{36}$/);
  assert.equal(a.headers['x-content-type-options'], 'nosniff');
  assert.equal(a.headers['x-frame-options'], 'DENY');
  assert.match(a.headers['content-security-policy'] ?? '', /default-src 'self'/);
  if (options.rateLimited) assert.equal(a.headers['x-ratelimit-limit'], '5');
}

describe('errors raised before routing (finding 10)', () => {
  it('answers a malformed percent-encoding in the URL with 400 bad_request', async () => {
    assertApiAnswer(await get(`/api/environments/%ZZ${SENTINEL}`), 400, 'bad_request', { rateLimited: true });
  });

  it('answers a path parameter over its length with 414 uri_too_long', async () => {
    assertApiAnswer(await get(`/api/environments/${SENTINEL}${'a'.repeat(300)}`), 414, 'uri_too_long', {
      rateLimited: true,
    });
  });

  it('answers a URL larger than the header limit with 431 headers_too_large', async () => {
    assertApiAnswer(
      await get(`/api/environments/${SENTINEL}${'a'.repeat(20_000)}`),
      431,
      'headers_too_large',
      {
        rateLimited: false,
      },
    );
  });

  it('answers a header overflow with 431 headers_too_large', async () => {
    assertApiAnswer(
      await get('/health', `X-Big: ${SENTINEL}${'a'.repeat(20_000)}\r\n`),
      431,
      'headers_too_large',
      {
        rateLimited: false,
      },
    );
  });

  it('answers a malformed Content-Length with 400 bad_request', async () => {
    const a = await raw(
      `POST /api/auth/login?${SENTINEL} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: abc\r\n\r\n{}`,
    );
    assertApiAnswer(a, 400, 'bad_request', { rateLimited: false });
  });

  it('answers a request line that is not HTTP with 400 bad_request', async () => {
    assertApiAnswer(await raw(`GARBAGE ${SENTINEL}\r\n\r\n`), 400, 'bad_request', { rateLimited: false });
  });

  it('counts malformed URLs against the per-IP rate limit', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await get(`/api/x/%ZZ${i}`)).status);
    assert.ok(statuses.includes(429), `never rate limited: ${statuses.join(' ')}`);
    const limited = await get('/api/x/%ZZ');
    assertApiAnswer(limited, 429, 'rate_limited', { rateLimited: true });
    assert.ok(Number(limited.headers['retry-after']) >= 1);
  });
});
