/**
 * Network policy resolution by host name.
 *
 * - No rules: unrestricted (no enforcement).
 * - Otherwise the most specific matching rule wins: exact name > `*.suffix` (longest suffix first) > `*`.
 *   `*.example.com` matches subdomains of example.com, not example.com itself. No match: deny.
 * - A rule with `include: "defaults"` adds DEFAULT_ALLOWED_HOSTS as allow rules; an explicit rule for the
 *   same pattern beats the preset.
 * - While enforcing, literal IP addresses are refused (host names only). Which resolved addresses may be
 *   dialled at all is decided by addresses.ts, policy or not.
 */
import net from 'node:net';
import { AppError } from '../errors.ts';

export interface PolicyRule {
  domain?: string;
  action: 'allow' | 'deny';
  include?: string;
}

/** The `defaults` preset: common development hosts (package registries, git hosts, AI provider APIs). */
export const DEFAULT_ALLOWED_HOSTS: readonly string[] = [
  // JavaScript
  'registry.npmjs.org',
  '*.npmjs.org',
  'registry.yarnpkg.com',
  'repo.yarnpkg.com',
  'nodejs.org',
  'bun.sh',
  // Python
  'pypi.org',
  'files.pythonhosted.org',
  // Rust, Go, Ruby, Java, PHP
  'crates.io',
  'index.crates.io',
  'static.crates.io',
  'static.rust-lang.org',
  'proxy.golang.org',
  'sum.golang.org',
  'storage.googleapis.com',
  'rubygems.org',
  'repo.maven.apache.org',
  'repo1.maven.org',
  'plugins.gradle.org',
  'services.gradle.org',
  'packagist.org',
  // OS packages
  'deb.debian.org',
  'security.debian.org',
  'archive.ubuntu.com',
  'security.ubuntu.com',
  'dl-cdn.alpinelinux.org',
  // Git hosts
  'github.com',
  '*.github.com',
  '*.githubusercontent.com',
  'gitlab.com',
  '*.gitlab.com',
  'bitbucket.org',
  // AI provider APIs
  'api.anthropic.com',
  'statsig.anthropic.com',
  'api.openai.com',
  'chatgpt.com',
  'generativelanguage.googleapis.com',
  'oauth2.googleapis.com',
  'openrouter.ai',
  'opencode.ai',
  'models.dev',
];

export interface CompiledPolicy {
  enforcing: boolean;
  decide(host: string): 'allow' | 'deny';
}

const HOST_RE =
  /^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

function normalize(host: string): string {
  return host.trim().toLowerCase().replace(/\.$/, '');
}

/** Validates a request body's rules; throws AppError(bad_request). */
export function parseRules(body: unknown): PolicyRule[] {
  if (typeof body !== 'object' || body === null || !Array.isArray((body as { rules?: unknown }).rules)) {
    throw new AppError('bad_request', 'body must be {"rules": [...]}');
  }
  const rules: PolicyRule[] = [];
  for (const [i, raw] of (body as { rules: unknown[] }).rules.entries()) {
    if (typeof raw !== 'object' || raw === null)
      throw new AppError('bad_request', `rules[${i}] must be an object`);
    const r = raw as Record<string, unknown>;
    if (r['action'] !== 'allow' && r['action'] !== 'deny') {
      throw new AppError('bad_request', `rules[${i}].action must be "allow" or "deny"`);
    }
    const rule: PolicyRule = { action: r['action'] };
    if (r['include'] !== undefined && r['include'] !== null && r['include'] !== '') {
      if (r['include'] !== 'defaults')
        throw new AppError('bad_request', `rules[${i}].include must be "defaults"`);
      rule.include = 'defaults';
    }
    if (r['domain'] !== undefined && r['domain'] !== null && r['domain'] !== '') {
      if (typeof r['domain'] !== 'string')
        throw new AppError('bad_request', `rules[${i}].domain must be a string`);
      const d = normalize(r['domain']);
      const bare = d.startsWith('*.') ? d.slice(2) : d;
      if (d !== '*' && !HOST_RE.test(bare) && net.isIP(bare) === 0) {
        throw new AppError(
          'bad_request',
          `rules[${i}].domain is not a host name pattern: ${JSON.stringify(r['domain'])}`,
        );
      }
      rule.domain = d;
    } else if (!rule.include) {
      throw new AppError('bad_request', `rules[${i}] needs a domain or include`);
    }
    rules.push(rule);
  }
  return rules;
}

export function compilePolicy(rules: readonly PolicyRule[]): CompiledPolicy {
  if (rules.length === 0) return { enforcing: false, decide: () => 'allow' };
  const table = new Map<string, 'allow' | 'deny'>();
  if (rules.some((r) => r.include === 'defaults'))
    for (const h of DEFAULT_ALLOWED_HOSTS) table.set(h, 'allow');
  for (const r of rules) if (r.domain) table.set(r.domain, r.action);
  return {
    enforcing: true,
    decide(rawHost) {
      const host = normalize(rawHost.replace(/^\[|\]$/g, ''));
      if (net.isIP(host) !== 0) return 'deny';
      const exact = table.get(host);
      if (exact) return exact;
      const labels = host.split('.');
      for (let i = 1; i < labels.length; i++) {
        const hit = table.get(`*.${labels.slice(i).join('.')}`);
        if (hit) return hit;
      }
      return table.get('*') ?? 'deny';
    },
  };
}
