/**
 * Network policy resolution by host name.
 *
 * - No rules: unrestricted (no enforcement).
 * - Otherwise the most specific matching rule wins: exact name > `*.suffix` (longest suffix first) > `*`.
 *   `*.example.com` matches subdomains of example.com, not example.com itself. No match: deny.
 * - A rule with `include: "defaults"` adds DEFAULT_ALLOWED_HOSTS as allow rules; an explicit rule for the
 *   same pattern beats the preset.
 * - While enforcing, literal IP addresses are refused (host names only).
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

const ALWAYS_BLOCKED = new net.BlockList();
ALWAYS_BLOCKED.addSubnet('0.0.0.0', 8, 'ipv4');
ALWAYS_BLOCKED.addSubnet('127.0.0.0', 8, 'ipv4');
ALWAYS_BLOCKED.addSubnet('169.254.0.0', 16, 'ipv4');
ALWAYS_BLOCKED.addSubnet('224.0.0.0', 4, 'ipv4');
ALWAYS_BLOCKED.addSubnet('240.0.0.0', 4, 'ipv4');
ALWAYS_BLOCKED.addAddress('::', 'ipv6');
ALWAYS_BLOCKED.addAddress('::1', 'ipv6');
ALWAYS_BLOCKED.addSubnet('fe80::', 10, 'ipv6');
ALWAYS_BLOCKED.addSubnet('ff00::', 8, 'ipv6');

const PRIVATE = new net.BlockList();
PRIVATE.addSubnet('10.0.0.0', 8, 'ipv4');
PRIVATE.addSubnet('172.16.0.0', 12, 'ipv4');
PRIVATE.addSubnet('192.168.0.0', 16, 'ipv4');
PRIVATE.addSubnet('100.64.0.0', 10, 'ipv4');
PRIVATE.addSubnet('fc00::', 7, 'ipv6');

/**
 * Whether a resolved destination address may be dialled. Loopback, link-local (cloud metadata),
 * unspecified and multicast are always refused: the proxy runs in the host network namespace.
 * Private ranges are refused while a policy is enforced.
 */
export function addressAllowed(ip: string, enforcing: boolean): boolean {
  let addr = ip;
  let family: 'ipv4' | 'ipv6' = net.isIPv4(addr) ? 'ipv4' : 'ipv6';
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(addr);
  if (mapped) {
    addr = mapped[1]!;
    family = 'ipv4';
  }
  if (ALWAYS_BLOCKED.check(addr, family)) return false;
  if (enforcing && PRIVATE.check(addr, family)) return false;
  return true;
}
