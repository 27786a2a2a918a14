// Where the CLI keeps its credentials: $XDG_CONFIG_HOME/paddock/config.json, else
// ~/.config/paddock/config.json, written with mode 600 (directory 700). PADDOCK_URL and
// PADDOCK_API_KEY override the file.
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { CliError } from './errors.ts';

export interface StoredConfig {
  url?: string;
  api_key?: string;
}

export interface ResolvedConfig {
  url: string;
  apiKey: string | null;
  path: string;
}

export type Env = Readonly<Record<string, string | undefined>>;

export const DEFAULT_URL = 'http://localhost:4000';

export function configPath(env: Env): string {
  const base = env['XDG_CONFIG_HOME']?.trim() || join(env['HOME']?.trim() || homedir(), '.config');
  return join(base, 'paddock', 'config.json');
}

export function readStoredConfig(path: string): StoredConfig {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return {};
  }
  try {
    const parsed = JSON.parse(text) as unknown;
    if (!parsed || typeof parsed !== 'object') throw new Error('not an object');
    const { url, api_key } = parsed as Record<string, unknown>;
    return {
      ...(typeof url === 'string' ? { url } : {}),
      ...(typeof api_key === 'string' ? { api_key } : {}),
    };
  } catch {
    throw new CliError(`the config file ${path} is not valid JSON: fix or delete it, then run paddock login`);
  }
}

export function writeStoredConfig(path: string, config: StoredConfig): void {
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}

export function normalizeUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new CliError(`"${raw}" is not a URL: use the server address, e.g. https://paddock.example.com`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new CliError('the server URL must be http(s)');
  return url.origin + url.pathname.replace(/\/+$/, '');
}

/** https, or plain http to this machine only. */
export function isSafeTransport(url: string): boolean {
  const u = new URL(url);
  return u.protocol === 'https:' || ['localhost', '127.0.0.1', '[::1]'].includes(u.hostname);
}

export function resolveConfig(env: Env): ResolvedConfig {
  const path = configPath(env);
  const stored = readStoredConfig(path);
  const url = env['PADDOCK_URL']?.trim() || stored.url || DEFAULT_URL;
  const apiKey = env['PADDOCK_API_KEY']?.trim() || stored.api_key || null;
  return { url: normalizeUrl(url), apiKey, path };
}
