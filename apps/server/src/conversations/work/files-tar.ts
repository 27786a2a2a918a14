// A tar stream with every regular file's content redacted (files.ts invariant 3). A marker is
// not as long as the secret it replaces, so a redacted file has another size: each regular
// entry is read whole (the archive is bounded by ARCHIVE_MAX_BYTES), redacted, and written
// with its header's size and checksum rewritten. Every other entry (directories, links, GNU
// long names, pax headers) passes as it is. The end of the archive is two zero blocks.
//
// What must hold (files-tar.test.ts): the output is a valid tar (GNU tar lists and extracts
// it), a file without secrets is byte for byte the same, a file with one holds the marker.
import { Transform, type TransformCallback } from 'node:stream';
import type { SecretRegistry } from '../log/redactor.ts';

const BLOCK = 512;
const REGULAR = new Set([0x30, 0x00, 0x37]); // '0', '\0' (old tar), '7' (contiguous)

function readSize(header: Buffer): number {
  const field = header.subarray(124, 136);
  if ((field[0] ?? 0) & 0x80) {
    // Base-256 (GNU, for sizes of 8 GiB and more).
    let value = 0;
    for (let i = 1; i < field.length; i++) value = value * 256 + (field[i] ?? 0);
    return value;
  }
  const text = field.toString('latin1').replace(/\0.*$/s, '').trim();
  return text === '' ? 0 : Number.parseInt(text, 8);
}

function writeSize(header: Buffer, size: number): void {
  header.write(`${size.toString(8).padStart(11, '0')}\0`, 124, 12, 'latin1');
  header.fill(0x20, 148, 156);
  let sum = 0;
  for (const byte of header) sum += byte;
  header.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 8, 'latin1');
}

const padding = (size: number): number => (BLOCK - (size % BLOCK)) % BLOCK;

export function redactTar(registry: SecretRegistry): Transform {
  let pending: Buffer[] = [];
  let pendingBytes = 0;
  /** The header of the entry whose content is being read (null: expecting a header). */
  let entry: { header: Buffer; size: number; regular: boolean } | null = null;
  let ended = false;

  const take = (bytes: number): Buffer => {
    const all = pending.length === 1 ? (pending[0] as Buffer) : Buffer.concat(pending, pendingBytes);
    const out = all.subarray(0, bytes);
    const rest = all.subarray(bytes);
    pending = rest.length > 0 ? [rest] : [];
    pendingBytes = rest.length;
    return out;
  };

  return new Transform({
    transform(chunk: Buffer, _encoding, callback: TransformCallback) {
      if (ended) return callback();
      pending.push(chunk);
      pendingBytes += chunk.length;
      for (;;) {
        if (entry === null) {
          if (pendingBytes < BLOCK) break;
          const header = Buffer.from(take(BLOCK));
          if (header.every((b) => b === 0)) {
            ended = true;
            this.push(Buffer.alloc(BLOCK * 2));
            pending = [];
            pendingBytes = 0;
            break;
          }
          const size = readSize(header);
          entry = { header, size, regular: REGULAR.has(header[156] ?? 0) };
          continue;
        }
        const total = entry.size + padding(entry.size);
        if (pendingBytes < total) break;
        const body = take(total);
        if (entry.regular) {
          const content = registry.redact(body.subarray(0, entry.size));
          if (content.length !== entry.size) writeSize(entry.header, content.length);
          this.push(entry.header);
          this.push(content);
          this.push(Buffer.alloc(padding(content.length)));
        } else {
          this.push(entry.header);
          this.push(body);
        }
        entry = null;
      }
      callback();
    },
    flush(callback: TransformCallback) {
      // A stream cut short (the sandbox went away) still ends as a readable archive.
      if (!ended) this.push(Buffer.alloc(BLOCK * 2));
      callback();
    },
  });
}
