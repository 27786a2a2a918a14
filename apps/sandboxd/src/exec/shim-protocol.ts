/**
 * What sandboxd and a session shim (shim.ts) share: the replay buffer, the on-disk files of a supervised
 * session and the framing of their unix socket. Kept free of heavy imports: the shim loads it at start.
 *
 * Socket messages are `[type u8][length u32 BE][payload]`.
 * shim -> sandboxd: HELLO (JSON ShimHello), then the whole kept output as OUTPUT messages, then live OUTPUT,
 *   then EXIT (JSON {exit_code}); the shim ends the connection after EXIT.
 * sandboxd -> shim: STDIN (raw bytes), STDIN_EOF, RESIZE (JSON {rows, cols}).
 * OUTPUT payloads are `[stream u8][bytes]` (stream 1 stdout, 2 stderr; 0 for a TTY).
 *
 * Files in a session directory (<sandbox dir>/sessions/<id>/, mode 0700):
 *   shim.sock      the shim's socket (while it runs)
 *   session.json   SessionFile: metadata without argv/env (env values are secrets), shim and child pids
 *   output.bin     at exit: the kept output as `[stream u8][length u32 BE][bytes]` records
 *   result.json    at exit, written last: ResultFile
 *   shim.log       the shim's own errors
 */

export const SHIM_MARK = 'paddock-sandboxd-shim';

/**
 * Output flow control, in sandboxd (per WebSocket client) and in a shim (per sandboxd connection): once a
 * reader has more than HIGH bytes of a session's output waiting to be sent, the session's output is paused
 * (the process blocks in write once its pipe is full) until every reader is back under LOW. A slow or stalled
 * reader thus never grows a daemon's memory; the session runs at the pace of its slowest attached reader,
 * and freely when none is attached (the replay buffer is bounded on its own).
 */
export const OUTPUT_HIGH_WATER = 1024 * 1024;
export const OUTPUT_LOW_WATER = 256 * 1024;

export const MSG = { hello: 1, output: 2, exit: 3, stdin: 10, stdinEof: 11, resize: 12 } as const;

export interface SessionMeta {
  id: string;
  command: string;
  created: string;
  tty: boolean;
  rows: number;
  cols: number;
  stdin: boolean;
  detachable: boolean;
}

/**
 * What sandboxd writes on the shim's stdin, then closes it: the shim may have been started long before, in
 * the pool (shim-pool.ts), and learns its session only now. A stdin that ends empty means "no session: exit".
 */
export interface ShimSpec extends SessionMeta {
  /** the session directory (absolute); the shim works in it (its cwd) and creates everything there */
  dir: string;
  argv: string[];
  env: Record<string, string>;
  bufferBytes: number;
  /** FIFOs (stdout, stderr[, stdin]) from sandboxd's pool; the shim opens and unlinks them. */
  fifos: string[];
}

export interface SessionFile extends SessionMeta {
  shim_pid: number;
  shim_start: string;
  child_pid: number;
}

export interface ShimHello {
  child_pid: number;
  dropped: { stdout: number; stderr: number };
  last_activity: string;
}

export interface ResultFile {
  exit_code: number;
  exited_at: string;
  last_activity: string;
  dropped: { stdout: number; stderr: number };
}

export interface Chunk {
  stream: number;
  data: Buffer;
}

/** Output kept for replay: the newest `limit` bytes (whole chunks; the newest chunk is always kept). */
export class ReplayBuffer {
  readonly chunks: Chunk[] = [];
  readonly dropped = { stdout: 0, stderr: 0 };
  private bytes = 0;
  private readonly limit: number;
  constructor(limit: number) {
    this.limit = limit;
  }

  push(stream: number, data: Buffer): void {
    this.chunks.push({ stream, data });
    this.bytes += data.length;
    while (this.bytes > this.limit && this.chunks.length > 1) {
      const c = this.chunks.shift()!;
      this.bytes -= c.data.length;
      if (c.stream === 2) this.dropped.stderr += c.data.length;
      else this.dropped.stdout += c.data.length;
    }
  }

  reset(): void {
    this.chunks.length = 0;
    this.bytes = 0;
    this.dropped.stdout = 0;
    this.dropped.stderr = 0;
  }

  serialize(): Buffer {
    const parts: Buffer[] = [];
    for (const c of this.chunks) {
      const h = Buffer.alloc(5);
      h[0] = c.stream;
      h.writeUInt32BE(c.data.length, 1);
      parts.push(h, c.data);
    }
    return Buffer.concat(parts);
  }

  /** Records written by serialize() (a truncated tail is ignored). */
  static parse(buf: Buffer): Chunk[] {
    const out: Chunk[] = [];
    let i = 0;
    while (i + 5 <= buf.length) {
      const len = buf.readUInt32BE(i + 1);
      if (i + 5 + len > buf.length) break;
      out.push({ stream: buf[i]!, data: buf.subarray(i + 5, i + 5 + len) });
      i += 5 + len;
    }
    return out;
  }
}

export function frame(type: number, payload: Buffer | string = Buffer.alloc(0)): Buffer {
  const body = typeof payload === 'string' ? Buffer.from(payload) : payload;
  const h = Buffer.alloc(5);
  h[0] = type;
  h.writeUInt32BE(body.length, 1);
  return Buffer.concat([h, body]);
}

/** Splits a byte stream into messages. */
export class FrameDecoder {
  private buf: Buffer = Buffer.alloc(0);
  private readonly onMessage: (type: number, payload: Buffer) => void;
  constructor(onMessage: (type: number, payload: Buffer) => void) {
    this.onMessage = onMessage;
  }

  push(data: Buffer): void {
    this.buf = this.buf.length === 0 ? data : Buffer.concat([this.buf, data]);
    let i = 0;
    while (i + 5 <= this.buf.length) {
      const len = this.buf.readUInt32BE(i + 1);
      if (i + 5 + len > this.buf.length) break;
      this.onMessage(this.buf[i]!, this.buf.subarray(i + 5, i + 5 + len));
      i += 5 + len;
    }
    this.buf = i === this.buf.length ? Buffer.alloc(0) : this.buf.subarray(i);
  }
}

/** `/proc/self/fd/<dirfd>/<name>`: a short socket path (sun_path holds 108 bytes) for any directory. */
export function socketPathVia(dirFd: number, name: string): string {
  return `/proc/self/fd/${dirFd}/${name}`;
}
