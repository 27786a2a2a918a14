// paddock: the command-line client of the public API. Exit 0 on success, 1 with a clear
// message on any error (server unreachable, 401, 422 with field errors, bad manifest).
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { Command, CommanderError, Option } from 'commander';
import { stringify } from 'yaml';
import { registerAccountCommands } from './account.ts';
import { type ApiClient, createClient } from './client.ts';
import {
  type Env,
  isSafeTransport,
  normalizeUrl,
  readStoredConfig,
  resolveConfig,
  writeStoredConfig,
} from './config.ts';
import { deleteConversation, ExitStatus, registerConversationCommands } from './conversations.ts';
import { registerCredentialCommands } from './credentials.ts';
import { registerDiffCommand } from './diff.ts';
import { ApiError, CliError } from './errors.ts';
import { registerExportCommand } from './export.ts';
import { compileManifests, redactedPlan } from './manifest.ts';
import { counted, type Io, json, type OutputFormat, table, withProgress } from './output.ts';
import { promptHidden, promptLine, readAllStdin } from './prompt.ts';
import { registerPushCommand } from './push.ts';
import { findOne, manifestOf, type Row, resourceType, UUID } from './resources.ts';
import { registerShellCommand } from './shell.ts';
import { registerUsageCommand } from './usage.ts';

/** The CLI's version (apps/cli/package.json), for `paddock --version`. */
const VERSION = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

export async function main(argv: string[], env: Env, io: Io): Promise<number> {
  const program = new Command('paddock')
    .description('Paddock: run AI coding agents in sandboxes')
    .version(VERSION, '-V, --version', 'print the version of paddock')
    .addOption(
      new Option('-o, --output <format>', 'output format').choices(['table', 'json']).default('table'),
    )
    .showHelpAfterError()
    .exitOverride()
    .configureOutput({ writeOut: io.out, writeErr: io.err });

  const format = (): OutputFormat => program.opts<{ output: OutputFormat }>().output;
  const client = (): ApiClient => {
    const config = resolveConfig(env);
    return createClient({ url: config.url, apiKey: config.apiKey });
  };
  const print = (text: string) => io.out(text.endsWith('\n') ? text : `${text}\n`);
  const ctx = { io, env, client, format, print };

  program
    .command('login')
    .description('exchange email and password for an API key, stored in the config file (mode 600)')
    .option('--url <url>', 'server URL (default: PADDOCK_URL, the stored URL, or http://localhost:4000)')
    .option('--email <email>', 'account email (prompted when omitted)')
    .option('--password-stdin', 'read the password from standard input')
    .action(async (opts: { url?: string; email?: string; passwordStdin?: boolean }) => {
      const resolved = resolveConfig(env);
      const url = opts.url ? normalizeUrl(opts.url) : resolved.url;
      const email = opts.email ?? (await promptLine('Email: '));
      if (!email) throw new CliError('an email is required');
      const password = opts.passwordStdin
        ? (await readAllStdin()).replace(/\r?\n$/, '')
        : await promptHidden('Password: ');
      if (!password) throw new CliError('a password is required');
      if (!isSafeTransport(url)) {
        io.err(
          `paddock: warning: ${url} is plain http: the password and the API key cross the network unencrypted\n`,
        );
      }
      const key = await withProgress(io, 'signing in', () =>
        createClient({ url, apiKey: null })
          .request<{ key: string; prefix: string }>('POST', '/api/auth/token', {
            email,
            password,
            name: `paddock CLI on ${hostname()}`.slice(0, 100),
          })
          .catch((err: unknown) => {
            // A refused sign-in is not a missing login: say what the server said.
            if (err instanceof ApiError && err.status === 401)
              throw new CliError(`cannot sign in: ${err.serverMessage ?? 'invalid email or password'}`);
            throw err;
          }),
      );
      writeStoredConfig(resolved.path, { ...readStoredConfig(resolved.path), url, api_key: key.key });
      if (format() === 'json') print(json({ url, prefix: key.prefix, config: resolved.path }));
      else print(`Logged in to ${url} (key ${key.prefix}…), saved to ${resolved.path}`);
    });

  program
    .command('whoami')
    .description('show the account, server and API key the CLI uses')
    .action(async () => {
      const resolved = resolveConfig(env);
      const me = await client().request<Row>('GET', '/api/auth/me');
      const source = env['PADDOCK_API_KEY']?.trim() ? 'PADDOCK_API_KEY' : resolved.path;
      const prefix = resolved.apiKey?.slice(0, 12) ?? '';
      if (format() === 'json')
        print(json({ url: resolved.url, key_prefix: prefix, key_from: source, user: me }));
      else
        print(
          `${String(me['email'])}${me['is_admin'] === true ? ' (admin)' : ''} on ${resolved.url}, key ${prefix}… from ${source}`,
        );
    });

  program
    .command('logout')
    .description('revoke the API key stored by login and remove it from the config file')
    .action(async () => {
      const resolved = resolveConfig(env);
      const stored = readStoredConfig(resolved.path);
      const key = stored.api_key;
      const notes: string[] = [];
      if (key === undefined) notes.push(`no key is stored in ${resolved.path}`);
      else {
        // Revoked on the server first, so a copy of the file is no longer a login either. A
        // server that is down or a key already refused still leaves the machine logged out.
        const url = stored.url ? normalizeUrl(stored.url) : resolved.url;
        const api = createClient({ url, apiKey: key });
        try {
          const keys = await api.request<{ data: Row[] }>('GET', '/api/auth/api-keys');
          const own = keys.data.find((k) => k['prefix'] === key.slice(0, 12));
          if (own) await api.request('DELETE', `/api/auth/api-keys/${String(own['id'])}`);
          notes.push(`revoked key ${key.slice(0, 12)}… on ${url}`);
        } catch (err) {
          if (!(err instanceof CliError)) throw err;
          notes.push(`could not revoke the key on ${url} (${err.message}); it was removed here only`);
        }
        const { api_key: _removed, ...rest } = stored;
        writeStoredConfig(resolved.path, rest);
        notes.push(`removed it from ${resolved.path}`);
      }
      if (env['PADDOCK_API_KEY']?.trim())
        notes.push('PADDOCK_API_KEY is set in this shell and still applies');
      if (format() === 'json') print(json({ logged_out: key !== undefined, notes }));
      else print(`${key === undefined ? 'Not logged in' : 'Logged out'}: ${notes.join('; ')}`);
    });

  program
    .command('apply')
    .description('create or update the resources of manifest files (multi-document YAML)')
    .requiredOption('-f, --file <path...>', 'manifest file(s); "-" reads standard input')
    .option('--dry-run', 'validate and print the compiled plan (secret values redacted) without sending it')
    .action(async (opts: { file: string[]; dryRun?: boolean }) => {
      const files: Array<{ path: string; text: string }> = [];
      for (const path of opts.file) {
        try {
          files.push({ path, text: path === '-' ? await readAllStdin() : readFileSync(path, 'utf8') });
        } catch (err) {
          throw new CliError(
            `cannot read ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`,
          );
        }
      }
      const manifest = compileManifests(files, env);
      if (opts.dryRun) {
        const plan = redactedPlan(manifest);
        if (format() === 'json') print(json(plan));
        else
          print(`# dry run: ${counted(plan.resources.length, 'resource')}, nothing sent\n${stringify(plan)}`);
        return;
      }
      const response = await withProgress(
        io,
        `applying ${counted(manifest.resources.length, 'resource')}`,
        () =>
          client().request<{
            results: Array<{
              kind: string;
              name: string;
              action: string;
              errors?: Record<string, string[]>;
              secrets?: Record<string, string>;
            }>;
            summary: Record<string, number>;
          }>('POST', '/api/apply', manifest),
      );
      if (format() === 'json') print(json(response));
      else {
        const rows = response.results.map((r) => [
          r.kind,
          r.name,
          r.action,
          r.secrets
            ? Object.entries(r.secrets)
                .map(([k, v]) => `${k}=${v}`)
                .join(' ')
            : '',
        ]);
        print(table(['KIND', 'NAME', 'ACTION', 'SECRETS'], rows));
        for (const r of response.results.filter((x) => x.errors)) {
          for (const [field, messages] of Object.entries(r.errors ?? {})) {
            for (const m of messages) io.err(`error: ${r.kind} ${r.name}: ${field}: ${m}\n`);
          }
        }
        const s = response.summary;
        print(
          `${s['created']} created, ${s['updated']} updated, ${s['unchanged']} unchanged, ${s['error']} failed`,
        );
      }
      if ((response.summary['error'] ?? 0) > 0) throw new CliError('some resources failed to apply', [], 1);
    });

  program
    .command('get')
    .description(
      'list environments, vaults or agents, or show one by name or id: as a manifest that `paddock apply -f` takes back (-o json: the API view)',
    )
    .argument('<type>', 'environments | vaults | agents')
    .argument('[name-or-id]')
    .action(async (typeWord: string, nameOrId: string | undefined) => {
      const type = resourceType(typeWord);
      const api = client();
      if (nameOrId) {
        const one = await findOne(api, type, nameOrId);
        print(
          format() === 'json' ? json(one) : stringify(await manifestOf(api, type, one), { lineWidth: 0 }),
        );
        return;
      }
      const list = await api.request<{ data: Row[] }>('GET', type.path);
      if (format() === 'json') print(json(list.data));
      else if (list.data.length === 0) print(`no ${typeWord}`);
      else
        print(
          table(
            type.columns.map(([h]) => h),
            list.data.map((r) => type.columns.map(([, f]) => f(r))),
          ),
        );
    });

  program
    .command('delete')
    .description('delete an environment, vault or agent by name or id, or a conversation by id')
    .argument('<type-or-id>', 'environments | vaults | agents | conversations, or a conversation id')
    .argument('[name-or-id]')
    .action(async (typeWord: string, nameOrId: string | undefined) => {
      if (nameOrId === undefined && UUID.test(typeWord)) return await deleteConversation(ctx, typeWord);
      if (nameOrId === undefined) throw new CliError('which one? paddock delete <type> <name-or-id>', [], 2);
      if (['conversation', 'conversations', 'conv', 'convs'].includes(typeWord))
        return await deleteConversation(ctx, nameOrId);
      const type = resourceType(typeWord);
      const api = client();
      const one = await findOne(api, type, nameOrId);
      await api.request('DELETE', `${type.path}/${one['id']}`);
      if (format() === 'json') print(json({ deleted: one['id'] }));
      else print(`deleted ${type.singular} ${one['name']} (${one['id']})`);
    });

  registerConversationCommands(program, ctx);
  registerCredentialCommands(program, ctx);
  registerUsageCommand(program, ctx);
  registerPushCommand(program, ctx);
  registerDiffCommand(program, ctx);
  registerShellCommand(program, ctx);
  registerExportCommand(program, ctx);
  registerAccountCommands(program, ctx);

  const keys = program.command('keys').description('list, create and revoke API keys');
  keys
    .command('list', { isDefault: true })
    .description('list active API keys (metadata only)')
    .action(async () => {
      const list = await client().request<{ data: Row[] }>('GET', '/api/auth/api-keys');
      if (format() === 'json') print(json(list.data));
      else
        print(
          table(
            ['NAME', 'ID', 'PREFIX', 'CREATED', 'LAST USED', 'EXPIRES'],
            list.data.map((k) => [
              String(k['name']),
              String(k['id']),
              String(k['prefix']),
              String(k['created_at'] ?? ''),
              String(k['last_used_at'] ?? '-'),
              String(k['expires_at'] ?? 'never'),
            ]),
          ),
        );
    });
  keys
    .command('create')
    .description('create an API key; the key is printed once')
    .requiredOption('--name <name>', 'a label for the key')
    .option('--expires-in-days <days>', 'expiry in days (default: never)')
    .action(async (opts: { name: string; expiresInDays?: string }) => {
      let days: number | null = null;
      if (opts.expiresInDays !== undefined) {
        days = Number(opts.expiresInDays);
        if (!Number.isInteger(days) || days < 1)
          throw new CliError('--expires-in-days must be a positive integer');
      }
      const created = await client().request<Row>('POST', '/api/auth/api-keys', {
        name: opts.name,
        expires_in_days: days,
      });
      if (format() === 'json') print(json(created));
      else
        print(
          `Created key ${created['name']} (${created['id']}). Store it now; it is not shown again:\n${created['key']}`,
        );
    });
  keys
    .command('revoke')
    .description('revoke an API key by id')
    .argument('<id>')
    .action(async (id: string) => {
      await client().request('DELETE', `/api/auth/api-keys/${encodeURIComponent(id)}`);
      if (format() === 'json') print(json({ revoked: id }));
      else print(`revoked key ${id}`);
    });

  try {
    await program.parseAsync(argv, { from: 'user' });
    return 0;
  } catch (err) {
    if (err instanceof ExitStatus) return err.code;
    if (err instanceof CommanderError) {
      return err.code === 'commander.helpDisplayed' || err.code === 'commander.version'
        ? 0
        : err.exitCode || 2;
    }
    if (err instanceof CliError) {
      io.err(`paddock: ${err.message}\n`);
      for (const d of err.details) io.err(`  ${d}\n`);
      return err.exitCode;
    }
    io.err(`paddock: unexpected error: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

const io: Io = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  errIsTty: process.stderr.isTTY === true,
  outIsTty: process.stdout.isTTY === true,
  onInterrupt(handler) {
    process.on('SIGINT', handler);
    return () => process.off('SIGINT', handler);
  },
};

main(process.argv.slice(2), process.env, io).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`paddock: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = 1;
  },
);
