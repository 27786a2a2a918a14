/** Small wire-level clients for the tests (independent of packages/sandbox-client). */
import { WebSocket } from 'ws';
import type { SessionJson } from '../src/exec/sessions.ts';

export interface Api {
  url: string;
  token: string;
}

export async function api(
  a: Api,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
) {
  const res = await fetch(`${a.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${a.token}`,
      ...(body !== undefined && !(body instanceof Uint8Array) ? { 'content-type': 'application/json' } : {}),
      ...headers,
    },
    ...(body !== undefined ? { body: body instanceof Uint8Array ? body : JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  let json: unknown = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {}
  return { status: res.status, json: json as Record<string, unknown> & { [k: string]: unknown }, text };
}

/** An exec session as `GET /v1/sandboxes/:name/exec` lists it (the daemon's own shape). */
export type ListedSession = SessionJson;

/** The exec sessions of sandbox `name`. */
export async function listSessions(a: Api, name: string): Promise<ListedSession[]> {
  return (await api(a, 'GET', `/v1/sandboxes/${name}/exec`)).json['sessions'] as ListedSession[];
}

export function ndjsonLines(text: string): Record<string, unknown>[] {
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** The id a checkpoint's NDJSON lines announce (the line with `checkpoint_id`), if any. */
export function checkpointIdOf(lines: Record<string, unknown>[]): string | undefined {
  const id = lines.find((l) => typeof l['checkpoint_id'] === 'string')?.['checkpoint_id'];
  return id as string | undefined;
}

export interface ExecOptions {
  env?: Record<string, string>;
  stdin?: string | Buffer;
  dir?: string;
  detachable?: boolean;
  /** `root`: the sandboxd extension `user=root` */
  user?: 'root';
  tty?: boolean;
  rows?: number;
  cols?: number;
  timeoutMs?: number;
}

export interface ExecResult {
  stdout: string;
  stderr: string;
  exitCode: number | null;
  info: Record<string, unknown> | null;
  texts: Record<string, unknown>[];
}

export function execUrl(a: Api, name: string, cmd: string[], o: ExecOptions = {}): string {
  const q = new URLSearchParams();
  for (const c of cmd) q.append('cmd', c);
  for (const [k, v] of Object.entries(o.env ?? {})) q.append('env', `${k}=${v}`);
  q.set('stdin', o.stdin !== undefined ? 'true' : 'false');
  if (o.dir) q.set('dir', o.dir);
  if (o.detachable) q.set('detachable', 'true');
  if (o.user) q.set('user', o.user);
  if (o.tty) {
    q.set('tty', 'true');
    q.set('rows', String(o.rows ?? 24));
    q.set('cols', String(o.cols ?? 80));
  }
  return `${a.url.replace(/^http/, 'ws')}/v1/sandboxes/${encodeURIComponent(name)}/exec?${q}`;
}

/** Collects a session's frames until the socket closes (exit) or the timeout. */
export function collect(ws: WebSocket, tty: boolean, timeoutMs: number): Promise<ExecResult> {
  const r: ExecResult = { stdout: '', stderr: '', exitCode: null, info: null, texts: [] };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      ws.terminate();
      reject(
        new Error(`exec timed out; stdout so far: ${r.stdout.slice(-500)} stderr: ${r.stderr.slice(-500)}`),
      );
    }, timeoutMs);
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      if (!isBinary) {
        const msg = JSON.parse(data.toString()) as Record<string, unknown>;
        r.texts.push(msg);
        if (msg['type'] === 'session_info') r.info = msg;
        if (msg['type'] === 'exit') r.exitCode = msg['exit_code'] as number;
        return;
      }
      if (tty) {
        r.stdout += data.toString();
        return;
      }
      const id = data[0];
      if (id === 1) r.stdout += data.subarray(1).toString();
      else if (id === 2) r.stderr += data.subarray(1).toString();
      else if (id === 3) r.exitCode = data.readInt32BE(1);
    });
    ws.on('close', () => {
      clearTimeout(timer);
      resolve(r);
    });
    ws.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    // A refused upgrade fails with sandboxd's answer (status and body, e.g. a 503's reason), not
    // only ws's "Unexpected server response".
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (chunk: Buffer) => {
        if (body.length < 2000) body += chunk.toString();
      });
      res.on('end', () => {
        clearTimeout(timer);
        reject(new Error(`exec refused: ${res.statusCode} ${body}`));
      });
      res.on('error', () => {});
    });
  });
}

export function openExec(a: Api, name: string, cmd: string[], o: ExecOptions = {}): WebSocket {
  return new WebSocket(execUrl(a, name, cmd, o), { headers: { authorization: `Bearer ${a.token}` } });
}

export async function exec(a: Api, name: string, cmd: string[], o: ExecOptions = {}): Promise<ExecResult> {
  const ws = openExec(a, name, cmd, o);
  const done = collect(ws, o.tty ?? false, o.timeoutMs ?? 30_000);
  if (o.stdin !== undefined) {
    const stdin = o.stdin;
    ws.once('open', () => {
      ws.send(Buffer.concat([Buffer.from([0]), Buffer.from(stdin)]));
      ws.send(Buffer.from([4]));
    });
  }
  return done;
}

export async function sh(a: Api, name: string, script: string, o: ExecOptions = {}): Promise<ExecResult> {
  return exec(a, name, ['/bin/sh', '-c', script], o);
}

export function attach(a: Api, name: string, id: string): WebSocket {
  return new WebSocket(
    `${a.url.replace(/^http/, 'ws')}/v1/sandboxes/${encodeURIComponent(name)}/exec/${id}`,
    {
      headers: { authorization: `Bearer ${a.token}` },
    },
  );
}

/** Polls fn until it returns a truthy value (bounded). */
export async function waitFor<T>(
  fn: () => Promise<T> | T,
  what: string,
  timeoutMs = 10_000,
): Promise<NonNullable<T>> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as NonNullable<T>;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
