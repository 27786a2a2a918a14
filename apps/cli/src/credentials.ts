// paddock credentials: the account's inference provider keys (PUT/DELETE/GET
// /api/account/inference-credentials). The key is never an argument (argv is visible in the
// process list and kept in shell history): it is read from standard input when that is a pipe
// or a file, otherwise from a prompt with echo off. It is never printed.
import type { Command } from 'commander';
import type { CommandContext } from './conversations.ts';
import { CliError } from './errors.ts';
import { json, table } from './output.ts';
import { promptHidden, readAllStdin } from './prompt.ts';

const PATH = '/api/account/inference-credentials';
const PROVIDERS = ['anthropic', 'openai', 'gemini'];
const LABEL: Record<string, string> = { anthropic: 'Anthropic', openai: 'OpenAI', gemini: 'Gemini' };

interface Credential {
  provider: string;
  set: boolean;
  base_url: string | null;
  updated_at: string | null;
}

function providerArg(raw: string): string {
  const provider = raw.toLowerCase();
  if (!PROVIDERS.includes(provider))
    throw new CliError(`unknown provider ${JSON.stringify(raw)}: one of ${PROVIDERS.join(', ')}`, [], 2);
  return provider;
}

async function readKey(provider: string): Promise<string> {
  const raw = process.stdin.isTTY
    ? await promptHidden(`${LABEL[provider] ?? provider} API key: `)
    : await readAllStdin();
  const key = raw.trim();
  if (key === '') throw new CliError('no key given: pipe it on standard input or type it at the prompt');
  return key;
}

export function registerCredentialCommands(program: Command, ctx: CommandContext): void {
  const { client, format, print } = ctx;
  const credentials = program
    .command('credentials')
    .description(
      "the account's inference provider keys (anthropic, openai, gemini), injected into its sandboxes",
    );

  credentials
    .command('list', { isDefault: true })
    .description('show which providers have a key set (the keys are never shown)')
    .action(async () => {
      const res = await client().request<{ data: Credential[] }>('GET', PATH);
      if (format() === 'json') print(json(res.data));
      else
        print(
          table(
            ['PROVIDER', 'SET', 'BASE URL', 'UPDATED'],
            res.data.map((c) => [c.provider, c.set ? 'yes' : 'no', c.base_url ?? '-', c.updated_at ?? '-']),
          ),
        );
    });

  credentials
    .command('set')
    .description(
      'set the key of a provider, read from standard input or a hidden prompt (never from the command line)',
    )
    .argument('<provider>', PROVIDERS.join(' | '))
    .option('--base-url <url>', 'a gateway to send requests to instead of the provider (https)')
    .allowExcessArguments(false)
    .action(async (raw: string, opts: { baseUrl?: string }) => {
      const provider = providerArg(raw);
      const apiKey = await readKey(provider);
      const body: Record<string, string> = { api_key: apiKey };
      if (opts.baseUrl !== undefined) body['base_url'] = opts.baseUrl;
      const saved = await client().request<Credential>('PUT', `${PATH}/${provider}`, body);
      if (format() === 'json') print(json(saved));
      else
        print(
          `${LABEL[provider]} key set${saved.base_url ? ` (base URL ${saved.base_url})` : ''}; the next turn of each of your conversations uses it`,
        );
    });

  credentials
    .command('delete')
    .description('delete the key of a provider (succeeds when none is set)')
    .argument('<provider>', PROVIDERS.join(' | '))
    .allowExcessArguments(false)
    .action(async (raw: string) => {
      const provider = providerArg(raw);
      await client().request('DELETE', `${PATH}/${provider}`);
      if (format() === 'json') print(json({ deleted: provider }));
      else print(`${LABEL[provider]} key deleted`);
    });
}
