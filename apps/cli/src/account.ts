// paddock account delete: deletes the account the CLI is logged in to (DELETE /api/account),
// everything in it included. The address must be typed again (--confirm, or at the prompt);
// a password account's password is read from standard input when that is a pipe or a file,
// otherwise from a prompt with echo off, never from the command line. The stored key died
// with the account, so it is removed from the config file when it was the one used.
import type { Command } from 'commander';
import { readStoredConfig, resolveConfig, writeStoredConfig } from './config.ts';
import type { CommandContext } from './conversations.ts';
import { CliError } from './errors.ts';
import { json } from './output.ts';
import { promptHidden, promptLine, readAllStdin } from './prompt.ts';

interface Me {
  email: string;
  has_password: boolean;
}

export function registerAccountCommands(program: Command, ctx: CommandContext): void {
  const { client, env, format, print } = ctx;
  const account = program.command('account').description('the account the CLI is logged in to');

  account
    .command('delete')
    .description(
      'delete the account and everything in it: conversations and sandboxes, environments, vaults, secrets, agents, keys (irreversible)',
    )
    .option('--confirm <email>', "the account's email address, typed again (prompted when omitted)")
    .action(async (opts: { confirm?: string }) => {
      const api = client();
      const me = await api.request<Me>('GET', '/api/auth/me');
      const confirm =
        opts.confirm ?? (await promptLine(`Type ${me.email} to delete this account for good: `));
      if (confirm.trim().toLowerCase() !== me.email.toLowerCase()) {
        throw new CliError(`the address typed is not ${me.email}: nothing was deleted`);
      }
      let password: string | undefined;
      if (me.has_password) {
        password = (process.stdin.isTTY ? await promptHidden('Password: ') : await readAllStdin()).replace(
          /\r?\n$/,
          '',
        );
        if (!password) throw new CliError('a password is required: pipe it on standard input or type it');
      }
      await api.request('DELETE', '/api/account', {
        confirm_email: confirm,
        ...(password === undefined ? {} : { current_password: password }),
      });
      const resolved = resolveConfig(env);
      const stored = readStoredConfig(resolved.path);
      // Only the key that was just used is dead (PADDOCK_API_KEY may name another account's).
      const removed = stored.api_key !== undefined && stored.api_key === resolved.apiKey;
      if (removed) {
        const { api_key: _gone, ...rest } = stored;
        writeStoredConfig(resolved.path, rest);
      }
      if (format() === 'json')
        print(json({ deleted: me.email, key_removed_from: removed ? resolved.path : null }));
      else
        print(`Deleted the account ${me.email}${removed ? `; removed its key from ${resolved.path}` : ''}`);
    });
}
