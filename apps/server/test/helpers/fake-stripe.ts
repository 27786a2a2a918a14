// A fake of Stripe's HTTP API on loopback, for the official `stripe` SDK pointed at it through
// BILLING_STRIPE_API_BASE (host, port, protocol), the SDK itself unchanged. It speaks the wire
// protocol as the SDK does: form-encoded request bodies with bracketed keys
// (`line_items[0][price_data][unit_amount]=900`), Bearer secret-key auth, Idempotency-Key
// replays, JSON objects with `object`, `id` and `created`, and errors as
// `{ error: { type, code, message, param } }` with Stripe's status codes. Stateful for what
// billing calls: customers, checkout sessions, billing portal sessions and subscriptions
// (retrieve, update, cancel).
//
//   const stripe = await startFakeStripe();
//   env: { BILLING_STRIPE_SECRET_KEY: stripe.secretKey, BILLING_STRIPE_API_BASE: stripe.url }
//   stripe.putSubscription({ id: 'sub_1', customer: 'cus_1', status: 'active' });
//   stripe.requests  // every request as received: method, path, parsed form, headers
//   stripe.outage = 503   // every request answered 503 (null: healthy)
//   await stripe.close();
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

// biome-ignore lint/suspicious/noExplicitAny: Stripe objects are open JSON, asserted field by field
type Json = any;

export interface FakeStripeRequest {
  method: string;
  path: string;
  /** The form body parsed into nested objects and arrays, as Stripe reads it. */
  form: Json;
  /** The raw form body, as the SDK encoded it. */
  raw: string;
  headers: IncomingMessage['headers'];
}

export interface FakeStripe {
  url: string;
  secretKey: string;
  requests: FakeStripeRequest[];
  customers: Map<string, Json>;
  subscriptions: Map<string, Json>;
  checkoutSessions: Map<string, Json>;
  /** Non-null: every request is answered with this status (an outage); 0 drops the connection. */
  outage: number | null;
  putSubscription(s: {
    id: string;
    customer: string;
    status: string;
    cancel_at_period_end?: boolean;
    current_period_end?: number;
  }): Json;
  close(): Promise<void>;
}

/** `a[b][0][c]=v` pairs into nested objects; numeric segments make arrays. */
export function parseStripeForm(raw: string): Json {
  const root: Json = {};
  for (const [key, value] of new URLSearchParams(raw)) {
    const parts = key.replace(/\]/g, '').split('[');
    let node = root;
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i]!;
      const last = i === parts.length - 1;
      if (last) {
        node[part] = value;
        break;
      }
      const nextIsIndex = /^\d+$/.test(parts[i + 1]!);
      node[part] ??= nextIsIndex ? [] : {};
      node = node[part];
    }
  }
  return root;
}

const now = () => Math.floor(Date.now() / 1000);
const id = (prefix: string) => `${prefix}_${randomBytes(12).toString('hex')}`;

function stripeError(status: number, type: string, message: string, extra: Json = {}) {
  return { status, body: { error: { type, message, ...extra } } };
}

function subscriptionObject(s: {
  id: string;
  customer: string;
  status: string;
  cancel_at_period_end?: boolean;
  current_period_end?: number;
}): Json {
  const start = now();
  const end = s.current_period_end ?? start + 30 * 86400;
  return {
    id: s.id,
    object: 'subscription',
    customer: s.customer,
    status: s.status,
    cancel_at_period_end: s.cancel_at_period_end ?? false,
    canceled_at: null,
    created: start,
    livemode: false,
    metadata: {},
    items: {
      object: 'list',
      data: [
        {
          id: id('si'),
          object: 'subscription_item',
          current_period_start: start,
          current_period_end: end,
          quantity: 1,
          subscription: s.id,
        },
      ],
      has_more: false,
      url: `/v1/subscription_items?subscription=${s.id}`,
    },
  };
}

export async function startFakeStripe(): Promise<FakeStripe> {
  const secretKey = `sk_test_${randomBytes(16).toString('hex')}`;
  const requests: FakeStripeRequest[] = [];
  const customers = new Map<string, Json>();
  const subscriptions = new Map<string, Json>();
  const checkoutSessions = new Map<string, Json>();
  const idempotent = new Map<string, { status: number; body: Json }>();

  const handle = (method: string, path: string, form: Json): { status: number; body: Json } => {
    if (method === 'POST' && path === '/v1/customers') {
      const c = {
        id: id('cus'),
        object: 'customer',
        email: form.email ?? null,
        metadata: form.metadata ?? {},
        created: now(),
        livemode: false,
      };
      customers.set(c.id, c);
      return { status: 200, body: c };
    }
    if (method === 'POST' && path === '/v1/checkout/sessions') {
      if (form.mode !== 'subscription')
        return stripeError(400, 'invalid_request_error', 'mode must be subscription here', { param: 'mode' });
      if (!form.success_url)
        return stripeError(400, 'invalid_request_error', 'Missing required param: success_url.', {
          code: 'parameter_missing',
          param: 'success_url',
        });
      if (form.customer && !customers.has(form.customer))
        return stripeError(400, 'invalid_request_error', `No such customer: '${form.customer}'`, {
          code: 'resource_missing',
          param: 'customer',
        });
      const sid = id('cs_test');
      const s = {
        id: sid,
        object: 'checkout.session',
        mode: form.mode,
        customer: form.customer ?? null,
        client_reference_id: form.client_reference_id ?? null,
        success_url: form.success_url,
        cancel_url: form.cancel_url ?? null,
        metadata: form.metadata ?? {},
        status: 'open',
        payment_status: 'unpaid',
        subscription: null,
        created: now(),
        expires_at: now() + 86400,
        livemode: false,
        url: `https://checkout.stripe.test/c/pay/${sid}`,
      };
      checkoutSessions.set(sid, {
        ...s,
        line_items: form.line_items,
        subscription_data: form.subscription_data,
      });
      return { status: 200, body: s };
    }
    if (method === 'POST' && path === '/v1/billing_portal/sessions') {
      if (!customers.has(form.customer))
        return stripeError(400, 'invalid_request_error', `No such customer: '${form.customer}'`, {
          code: 'resource_missing',
          param: 'customer',
        });
      const pid = id('bps');
      return {
        status: 200,
        body: {
          id: pid,
          object: 'billing_portal.session',
          customer: form.customer,
          return_url: form.return_url ?? null,
          created: now(),
          livemode: false,
          url: `https://billing.stripe.test/p/session/${pid}`,
        },
      };
    }
    const sub = /^\/v1\/subscriptions\/([A-Za-z0-9_]+)$/.exec(path);
    if (sub) {
      const s = subscriptions.get(sub[1]!);
      if (!s)
        return stripeError(404, 'invalid_request_error', `No such subscription: '${sub[1]}'`, {
          code: 'resource_missing',
          param: 'id',
        });
      if (method === 'GET') return { status: 200, body: s };
      if (method === 'POST') {
        if (form.cancel_at_period_end !== undefined)
          s.cancel_at_period_end = form.cancel_at_period_end === 'true';
        return { status: 200, body: s };
      }
      if (method === 'DELETE') {
        if (s.status === 'canceled')
          return stripeError(400, 'invalid_request_error', 'This subscription is already canceled.', {
            code: 'resource_missing',
          });
        s.status = 'canceled';
        s.canceled_at = now();
        return { status: 200, body: s };
      }
    }
    return stripeError(404, 'invalid_request_error', `Unrecognized request URL (${method}: ${path}).`);
  };

  const fake: FakeStripe = {
    url: '',
    secretKey,
    requests,
    customers,
    subscriptions,
    checkoutSessions,
    outage: null,
    putSubscription(s) {
      const obj = subscriptionObject(s);
      subscriptions.set(s.id, obj);
      return obj;
    },
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://fake');
      const raw = req.method === 'GET' ? url.search.slice(1) : Buffer.concat(chunks).toString('utf8');
      const form = parseStripeForm(raw);
      requests.push({ method: req.method ?? 'GET', path: url.pathname, form, raw, headers: req.headers });
      const reply = (status: number, body: Json) => {
        res.writeHead(status, { 'content-type': 'application/json', 'request-id': id('req') });
        res.end(JSON.stringify(body));
      };
      if (fake.outage === 0) {
        req.socket.destroy();
        return;
      }
      if (fake.outage !== null) {
        reply(fake.outage, { error: { type: 'api_error', message: 'The fake processor is down.' } });
        return;
      }
      if (req.headers.authorization !== `Bearer ${secretKey}`) {
        reply(401, {
          error: { type: 'invalid_request_error', message: 'Invalid API Key provided.' },
        });
        return;
      }
      const key = req.headers['idempotency-key'];
      const cacheKey = typeof key === 'string' && req.method === 'POST' ? `${url.pathname} ${key}` : null;
      const cached = cacheKey ? idempotent.get(cacheKey) : undefined;
      const out = cached ?? handle(req.method ?? 'GET', url.pathname, form);
      if (cacheKey && !cached) idempotent.set(cacheKey, out);
      reply(out.status, out.body);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  fake.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return fake;
}
