// paddock export: asks the server for a data export of the account (docs/data-export.md),
// waits while it is built (a spinner on a terminal), then downloads the gzipped JSON to a file.
// The file is written as `<file>.part` and renamed once whole, so an interrupted download
// never leaves a file that looks complete; an existing file is not overwritten without --force.
import { createWriteStream, existsSync, renameSync, rmSync } from 'node:fs';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Command } from 'commander';
import type { CommandContext } from './conversations.ts';
import { ApiError, CliError } from './errors.ts';
import { json, withProgress } from './output.ts';

const PATH = '/api/account/exports';
const POLL_MS = 1000;

interface ExportView {
  id: string;
  status: 'pending' | 'building' | 'ready' | 'failed' | 'expired';
  size_bytes: number | null;
  failure_reason: string | null;
  created_at: string;
  expires_at: string | null;
  download_url: string | null;
}

export function humanBytes(bytes: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${bytes} bytes` : `${value.toFixed(1)} ${units[unit]}`;
}

export function registerExportCommand(program: Command, ctx: CommandContext): void {
  const { io, client, format, print } = ctx;
  program
    .command('export')
    .description(
      'download everything the account owns (resources as manifests, conversations, logs, audit events) as gzipped JSON; secret values are never in it',
    )
    .option('-f, --file <path>', 'where to save it (default: paddock-export-<date>.json.gz)')
    .option('--id <id>', 'download an export asked for earlier instead of asking for a new one')
    .option('--force', 'overwrite the file if it exists')
    .allowExcessArguments(false)
    .action(async (opts: { file?: string; id?: string; force?: boolean }) => {
      const api = client();
      const file = opts.file ?? `paddock-export-${new Date().toISOString().slice(0, 10)}.json.gz`;
      if (existsSync(file) && !opts.force) {
        throw new CliError(`${file} exists: choose another with --file, or overwrite it with --force`);
      }
      let view: ExportView;
      if (opts.id) view = await api.request<ExportView>('GET', `${PATH}/${encodeURIComponent(opts.id)}`);
      else {
        try {
          view = await api.request<ExportView>('POST', PATH);
        } catch (err) {
          if (err instanceof ApiError && err.status === 429 && err.serverMessage) {
            throw new CliError(`cannot ask for an export now: ${err.serverMessage}`);
          }
          // One export at a time: one already being built is the one to wait for.
          if (!(err instanceof ApiError && err.code === 'export_in_progress')) throw err;
          const list = await api.request<{ data: ExportView[] }>('GET', PATH);
          const building = list.data.find((e) => e.status === 'pending' || e.status === 'building');
          if (!building) throw err;
          io.err(`paddock: an export asked for earlier is being built; waiting for it (${building.id})\n`);
          view = building;
        }
      }

      view = await withProgress(io, 'building the export', async () => {
        let current = view;
        while (current.status === 'pending' || current.status === 'building') {
          await new Promise((r) => setTimeout(r, POLL_MS));
          current = await api.request<ExportView>('GET', `${PATH}/${encodeURIComponent(current.id)}`);
        }
        return current;
      });
      if (view.status === 'failed')
        throw new CliError(`the export failed: ${view.failure_reason ?? 'no reason given'}`);
      if (view.status === 'expired')
        throw new CliError(`export ${view.id} has expired: run \`paddock export\` for a new one`);

      const total = view.size_bytes ?? 0;
      const res = await api.open(`${PATH}/${encodeURIComponent(view.id)}/download`, {
        headers: { accept: 'application/gzip' },
        signal: AbortSignal.timeout(60 * 60_000),
      });
      if (!res.body) throw new CliError('the server sent no export');
      let received = 0;
      let shown = 0;
      const progress = new Transform({
        transform(chunk: Buffer, _enc, callback) {
          received += chunk.length;
          if (io.errIsTty && Date.now() - shown > 100) {
            shown = Date.now();
            io.err(`\r\u001b[2Kdownloading ${humanBytes(received)} of ${humanBytes(total)}`);
          }
          callback(null, chunk);
        },
      });
      const part = `${file}.part`;
      try {
        await pipeline(
          Readable.fromWeb(res.body as Parameters<typeof Readable.fromWeb>[0]),
          progress,
          createWriteStream(part, { mode: 0o600 }),
        );
      } catch (err) {
        rmSync(part, { force: true });
        throw new CliError(`the download stopped: ${err instanceof Error ? err.message : String(err)}`);
      } finally {
        if (io.errIsTty) io.err('\r\u001b[2K');
      }
      if (received !== total) {
        rmSync(part, { force: true });
        throw new CliError(
          `the download stopped after ${received} of ${total} bytes: run \`paddock export --id ${view.id}\` again`,
        );
      }
      renameSync(part, file);
      if (format() === 'json')
        print(json({ id: view.id, file, size_bytes: received, expires_at: view.expires_at }));
      else
        print(
          `Saved export ${view.id} (${humanBytes(received)}, gzipped JSON) to ${file}; the server keeps it until ${view.expires_at ?? '-'}`,
        );
    });
}
