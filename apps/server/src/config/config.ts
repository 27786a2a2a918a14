// Every deployment variable of the spec, parsed once at boot into a frozen object.
// Rules (docs/configuration.md): a present-but-blank value means unset; a non-blank
// malformed value refuses to boot with a message naming the variable (never its value,
// because several of them are secrets). Nothing outside this folder reads process.env.
import { isIP } from 'node:net';
import { resolve as resolvePath } from 'node:path';
import { parseAllowCidrs, parseServiceRoutes, type SandboxReach } from './sandbox-reach.ts';

/** The console's build output in this checkout (apps/web/dist). */
export const DEFAULT_CONSOLE_DIR = resolvePath(import.meta.dirname, '../../../web/dist');

export type Env = Readonly<Record<string, string | undefined>>;

export type MailTransport =
  | { kind: 'none' }
  | { kind: 'smtp'; host: string; port: number; username?: string; password?: string }
  | { kind: 'api'; apiKey: string; baseUrl?: string };

export interface Config {
  readonly nodeEnv: string;
  readonly isProduction: boolean;
  readonly port: number;
  readonly host: string;
  readonly publicUrl: URL;
  /**
   * False when neither PUBLIC_URL nor SERVICE_DOMAIN is set (development): publicUrl is then
   * a stand-in, and every loopback form of the listening address counts as same-origin.
   */
  readonly publicUrlConfigured: boolean;
  /** True when PUBLIC_URL is https: redirect, HSTS and Secure cookies. */
  readonly httpsOnly: boolean;
  readonly dataDir: string;
  /**
   * PADDOCK_CONSOLE_DIR: the built web console (index.html and assets/) served at `/`.
   * Default: apps/web/dist of this checkout (`npm run build:web` writes it).
   */
  readonly consoleDir: string;
  readonly logLevel: string;
  /** `auto`: readable lines when stdout is a terminal outside production, JSON otherwise. */
  readonly logFormat: 'json' | 'pretty' | 'auto';
  readonly secretKeyBase?: string;
  /** 32 bytes, decoded. Undefined only before the development key is resolved. */
  readonly masterSecretsKey?: Buffer;
  /** MASTER_SECRETS_KEY_PREVIOUS: the key being rotated away from (`task rotate-master-key`). */
  readonly masterSecretsKeyPrevious?: Buffer;
  readonly database: {
    readonly url?: string;
    readonly ssl: boolean;
    readonly sslVerify: boolean;
    readonly sslCaFile?: string;
    readonly poolMax: number;
  };
  readonly sandbox: {
    readonly token?: string;
    readonly baseUrl?: string;
    readonly timeoutMs: number;
    readonly idleTimeoutMinutes: number;
    readonly maxLifetimeHours: number;
    /**
     * SANDBOX_CALLBACK_URL: the origin at which a sandbox reaches this service (its
     * PADDOCK_BASE_URL / SERVICE_BASE_URL). Default: PUBLIC_URL.
     */
    readonly callbackUrl: URL;
    /** Live sandboxes (pending, starting, ready) one user may have at once. */
    readonly maxConcurrentPerUser: number;
    /**
     * SANDBOXD_SERVICE_ROUTES and SANDBOXD_EGRESS_ALLOW_CIDRS, as sandboxd reads them: the
     * loopback and private addresses sandboxes can reach (sandbox-reach.ts).
     */
    readonly reach: SandboxReach;
  };
  readonly mail: {
    readonly transport: MailTransport;
    readonly from?: string;
    readonly supportEmail?: string;
    /** Mail job retries: delay = min(baseMs * 2^(attempt-1), 1 h), at most maxAttempts sends. */
    readonly retry: { readonly baseMs: number; readonly maxAttempts: number };
    /** Caller-triggered account mails (links, notices) sent to one address per rolling hour; more are dropped. */
    readonly perRecipientPerHour: number;
  };
  readonly oauth: {
    readonly github?: {
      readonly clientId: string;
      readonly clientSecret?: string;
      readonly authorizeUrl: string;
      readonly tokenUrl: string;
      readonly apiUrl: string;
    };
  };
  readonly firstUserAdmin: boolean;
  readonly registration: {
    readonly enabled: boolean;
    readonly allowedEmailDomains: readonly string[];
  };
  readonly billing: {
    readonly enabled: boolean;
    readonly webhookSecret?: string;
    readonly priceMonthlyCents: number | null;
    /** BILLING_STRIPE_SECRET_KEY: the processor's API key (sk_… or rk_…). Required in production with billing on. */
    readonly stripeSecretKey?: string;
    /** BILLING_STRIPE_API_BASE: where the SDK reaches the processor's API (a proxy, a fake); default Stripe's. */
    readonly stripeApiBase?: URL;
    /** BILLING_STRIPE_PRICE_ID: the recurring price checkout sells; unset, BILLING_PRICE_MONTHLY_CENTS in USD. */
    readonly stripePriceId?: string;
    /** BILLING_TRIAL_DAYS: the trial clock of a new account (default 14). */
    readonly trialDays: number;
  };
  readonly trustedProxies: readonly string[];
  readonly checkOriginExtra: readonly string[];
  readonly clusterDnsQuery?: string;
  /** null = private listener off. */
  readonly metricsPort: number | null;
  readonly logOutputBudgetMb: number;
  readonly unverifiedPrune: { readonly afterDays: number; readonly exempt: readonly string[] };
  readonly legal: {
    readonly entity: string;
    readonly contactEmail: string;
    readonly jurisdiction: string;
    readonly effectiveDate: string;
  } | null;
  readonly errorTrackingDsn?: string;
  readonly otelExporterOtlpEndpoint?: string;
  /**
   * OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG, as the OpenTelemetry specification names
   * them: which traces are kept (`ratio` of the new ones; `parentBased`: a child follows its parent).
   * Default `parentbased_always_on`.
   */
  readonly tracesSampler: { readonly parentBased: boolean; readonly ratio: number };
  readonly backup: { readonly retentionDays: number; readonly intervalSeconds: number | null };
  readonly serviceImageTag?: string;
  readonly rateLimit: {
    /**
     * Where the per-IP counters live: `memory` (per node: each replica counts its own requests) or
     * `postgres` (one count per client address shared by every replica on the database).
     */
    readonly store: 'memory' | 'postgres';
    readonly max: number;
    readonly windowSeconds: number;
    /** Per-IP budget per minute of each credential or mail-sending endpoint (login, token, register, resend, reset). */
    readonly authMax: number;
    /** Failed sign-ins per email address (known or not) per window before 429; PostgreSQL-backed, shared by replicas. */
    readonly loginFailureMax: number;
    readonly loginFailureWindowSeconds: number;
  };
  readonly shutdownGraceSeconds: number;
  /**
   * OWNER_LEASE_SECONDS: how long a conversation owner that stopped answering (hung, not dead)
   * keeps its conversations before another replica fences it and takes them over
   * (conversations/engine/owner.ts invariant 7). An integer from 5 to 3600.
   */
  readonly ownerLeaseSeconds: number;
  /**
   * Where a pushed branch's pull request is opened (conversations/work/push-providers.ts):
   * GITLAB_HOSTS, hosts that are GitLab besides gitlab.com (every other host is GitHub or GitHub
   * Enterprise); GIT_HOST_API_URLS, the API base URL of a host (`host=url,…`).
   */
  readonly gitHosts: {
    readonly gitlabHosts: readonly string[];
    readonly apiUrls: Readonly<Record<string, string>>;
  };
}

export class ConfigError extends Error {
  readonly problems: readonly string[];
  constructor(problems: readonly string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

export interface ParseResult {
  config: Config;
  warnings: string[];
}

/**
 * OWNER_LEASE_SECONDS bounds: below 5 s a busy event loop or a slow database could cost a healthy
 * owner its conversations (it renews every third of the lease); above an hour a hung owner is
 * not replaced in any useful time.
 */
export const MIN_OWNER_LEASE_SECONDS = 5;
export const MAX_OWNER_LEASE_SECONDS = 3600;

const MASTER_KEY_FORM = /^[A-Za-z0-9_-]{43}$/;

/** Decodes a MASTER_SECRETS_KEY value, or returns null when it is not 32 bytes of base64url without padding. */
export function decodeMasterKey(value: string): Buffer | null {
  if (!MASTER_KEY_FORM.test(value)) return null;
  const bytes = Buffer.from(value, 'base64url');
  if (bytes.length !== 32 || bytes.toString('base64url') !== value) return null;
  return bytes;
}

function isValidCidr(entry: string): boolean {
  const [addr, prefix, ...rest] = entry.split('/');
  if (rest.length > 0 || addr === undefined) return false;
  const family = isIP(addr);
  if (family === 0) return false;
  if (prefix === undefined) return true;
  if (!/^\d{1,3}$/.test(prefix)) return false;
  const bits = Number(prefix);
  return family === 4 ? bits <= 32 : bits <= 128;
}

/**
 * Parses the environment. Pure: reads only `env`, touches no files. Throws ConfigError
 * listing every problem at once.
 */
export function parseConfig(env: Env): ParseResult {
  const problems: string[] = [];
  const warnings: string[] = [];

  const str = (name: string): string | undefined => {
    const raw = env[name];
    if (raw === undefined) return undefined;
    const trimmed = raw.trim();
    return trimmed === '' ? undefined : trimmed;
  };
  const bool = (name: string, fallback: boolean): boolean => {
    const v = str(name);
    if (v === undefined) return fallback;
    const lower = v.toLowerCase();
    if (['true', '1', 'yes', 'on'].includes(lower)) return true;
    if (['false', '0', 'no', 'off'].includes(lower)) return false;
    problems.push(`${name}: must be true or false`);
    return fallback;
  };
  const nonNegInt = (name: string, fallback: number): number => {
    const v = str(name);
    if (v === undefined) return fallback;
    if (!/^\d+$/.test(v) || !Number.isSafeInteger(Number(v))) {
      problems.push(`${name}: must be a non-negative integer`);
      return fallback;
    }
    return Number(v);
  };
  const positiveInt = (name: string, fallback: number): number => {
    const n = nonNegInt(name, fallback);
    if (n === 0 && str(name) !== undefined) {
      problems.push(`${name}: must be a positive integer`);
      return fallback;
    }
    return n;
  };
  const intBetween = (name: string, fallback: number, min: number, max: number): number => {
    const v = str(name);
    if (v === undefined) return fallback;
    if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) {
      problems.push(`${name}: must be an integer from ${min} to ${max}`);
      return fallback;
    }
    return Number(v);
  };
  const port = (name: string): number | undefined => {
    const v = str(name);
    if (v === undefined) return undefined;
    if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 65535) {
      problems.push(`${name}: must be a TCP port between 1 and 65535`);
      return undefined;
    }
    return Number(v);
  };
  const url = (name: string, schemes: readonly string[]): URL | undefined => {
    const v = str(name);
    if (v === undefined) return undefined;
    try {
      const u = new URL(v);
      if (!schemes.includes(u.protocol)) {
        problems.push(
          `${name}: must be a URL with scheme ${schemes.map((s) => s.replace(':', '')).join(' or ')}`,
        );
        return undefined;
      }
      return u;
    } catch {
      problems.push(`${name}: must be an absolute URL`);
      return undefined;
    }
  };
  const email = (name: string): string | undefined => {
    const v = str(name);
    if (v === undefined) return undefined;
    // Accept "Name <addr@host>" as well as a bare address.
    const addr = /<([^>]+)>\s*$/.exec(v)?.[1] ?? v;
    if (!/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(addr)) {
      problems.push(`${name}: must be an email address`);
      return undefined;
    }
    return v;
  };
  const list = (name: string): string[] => {
    const v = str(name);
    if (v === undefined) return [];
    return v
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '');
  };

  const nodeEnv = str('NODE_ENV') ?? 'development';
  const isProduction = nodeEnv === 'production';

  // PUBLIC_URL, with SERVICE_DOMAIN as a deprecated alias.
  let publicUrl = url('PUBLIC_URL', ['http:', 'https:']);
  if (str('PUBLIC_URL') === undefined && str('SERVICE_DOMAIN') !== undefined) {
    warnings.push('SERVICE_DOMAIN is deprecated; set PUBLIC_URL instead');
    const raw = str('SERVICE_DOMAIN')!;
    const withScheme = /^https?:\/\//.test(raw) ? raw : `https://${raw}`;
    try {
      publicUrl = new URL(withScheme);
    } catch {
      problems.push('SERVICE_DOMAIN: must be a host name or URL');
    }
  }
  if (publicUrl && (publicUrl.pathname !== '/' || publicUrl.search || publicUrl.hash)) {
    problems.push('PUBLIC_URL: must be an origin without a path, query or fragment');
  }
  if (isProduction && !publicUrl && str('PUBLIC_URL') === undefined && str('SERVICE_DOMAIN') === undefined) {
    problems.push('PUBLIC_URL: required in production');
  }

  const listenPort = port('PORT') ?? 4000;
  const host = str('HOST') ?? (isProduction ? '0.0.0.0' : '127.0.0.1');
  if (str('HOST') !== undefined && isIP(host) === 0 && !/^[A-Za-z0-9.-]+$/.test(host)) {
    problems.push('HOST: must be an IP address or host name');
  }
  // Unset (development): the origin the server prints when it listens, so links in mail and
  // the API docs open the origin the person's session cookie belongs to.
  const shownHost =
    host === '0.0.0.0' || host === '::' ? 'localhost' : host.includes(':') ? `[${host}]` : host;
  const effectivePublicUrl = publicUrl ?? new URL(`http://${shownHost}:${listenPort}`);

  // MASTER_SECRETS_KEY: validated form; required in production.
  let masterSecretsKey: Buffer | undefined;
  const masterRaw = str('MASTER_SECRETS_KEY');
  if (masterRaw !== undefined) {
    const decoded = decodeMasterKey(masterRaw);
    if (!decoded) {
      problems.push(
        'MASTER_SECRETS_KEY: must be 32 random bytes encoded as base64 URL-safe without padding (43 characters)',
      );
    } else {
      masterSecretsKey = decoded;
    }
  } else if (isProduction) {
    problems.push('MASTER_SECRETS_KEY: required in production');
  }

  // MASTER_SECRETS_KEY_PREVIOUS: same form; only meaningful next to a (different) current key.
  let masterSecretsKeyPrevious: Buffer | undefined;
  const previousRaw = str('MASTER_SECRETS_KEY_PREVIOUS');
  if (previousRaw !== undefined) {
    const decoded = decodeMasterKey(previousRaw);
    if (!decoded) {
      problems.push(
        'MASTER_SECRETS_KEY_PREVIOUS: must be 32 random bytes encoded as base64 URL-safe without padding (43 characters)',
      );
    } else if (masterRaw === undefined) {
      problems.push('MASTER_SECRETS_KEY_PREVIOUS: set only together with MASTER_SECRETS_KEY (the new key)');
    } else if (masterSecretsKey?.equals(decoded)) {
      problems.push('MASTER_SECRETS_KEY_PREVIOUS: must differ from MASTER_SECRETS_KEY');
    } else {
      masterSecretsKeyPrevious = decoded;
    }
  }

  const secretKeyBase = str('SECRET_KEY_BASE');
  if (secretKeyBase !== undefined && secretKeyBase.length < 32) {
    problems.push('SECRET_KEY_BASE: must be at least 32 characters');
  }

  // Database.
  const databaseUrl = url('DATABASE_URL', ['postgres:', 'postgresql:']);
  if (isProduction && str('DATABASE_URL') === undefined) {
    problems.push('DATABASE_URL: required in production (the embedded database is for development only)');
  }
  const sslCaFile = str('DATABASE_SSL_CA_FILE');

  // Sandbox backend.
  const sandboxBaseUrl = url('SANDBOX_BASE_URL', ['http:', 'https:']);
  const callbackUrl = url('SANDBOX_CALLBACK_URL', ['http:', 'https:']);
  if (callbackUrl && (callbackUrl.pathname !== '/' || callbackUrl.search || callbackUrl.hash)) {
    problems.push('SANDBOX_CALLBACK_URL: must be an origin without a path, query or fragment');
  }

  // What sandboxes reach besides the internet (the variables sandboxd reads too).
  const reachOf = <T>(name: string, parse: (raw: string) => T[]): T[] => {
    const raw = str(name);
    if (raw === undefined) return [];
    try {
      return parse(raw);
    } catch (err) {
      problems.push(`${name}: ${(err as Error).message}`);
      return [];
    }
  };
  const reach: SandboxReach = {
    serviceRoutes: reachOf('SANDBOXD_SERVICE_ROUTES', parseServiceRoutes),
    egressAllowCidrs: reachOf('SANDBOXD_EGRESS_ALLOW_CIDRS', parseAllowCidrs),
  };

  // Mail.
  const emailDelivery = str('EMAIL_DELIVERY');
  if (emailDelivery !== undefined && emailDelivery.toLowerCase() !== 'none') {
    problems.push('EMAIL_DELIVERY: the only accepted value is "none"');
  }
  const providerKey = str('EMAIL_PROVIDER_API_KEY');
  const smtpHost = str('SMTP_HOST');
  const smtpPort = port('SMTP_PORT') ?? 587;
  let transport: MailTransport;
  if (emailDelivery?.toLowerCase() === 'none') {
    transport = { kind: 'none' };
  } else if (providerKey !== undefined) {
    const base = url('EMAIL_PROVIDER_BASE_URL', ['http:', 'https:']);
    transport = { kind: 'api', apiKey: providerKey, ...(base ? { baseUrl: base.origin } : {}) };
  } else if (smtpHost !== undefined) {
    const username = str('SMTP_USERNAME');
    const password = str('SMTP_PASSWORD');
    transport = {
      kind: 'smtp',
      host: smtpHost,
      port: smtpPort,
      ...(username ? { username } : {}),
      ...(password ? { password } : {}),
    };
  } else {
    if (isProduction) {
      problems.push(
        'EMAIL_DELIVERY: production needs a mail setting: EMAIL_PROVIDER_API_KEY, SMTP_HOST, or EMAIL_DELIVERY=none',
      );
    }
    // Development without mail settings behaves like EMAIL_DELIVERY=none.
    transport = { kind: 'none' };
  }
  const from = email('EMAIL_FROM');
  if (isProduction && transport.kind !== 'none' && from === undefined && str('EMAIL_FROM') === undefined) {
    problems.push('EMAIL_FROM: required in production when a mail provider or SMTP host is configured');
  }
  const supportEmail = email('SUPPORT_EMAIL');

  // OAuth (GitHub).
  const githubClientId = str('GITHUB_CLIENT_ID');
  const githubAuthorize = url('GITHUB_OAUTH_BASE_URL', ['http:', 'https:']);
  const githubApi = url('GITHUB_API_URL', ['http:', 'https:']);
  const githubBase = githubAuthorize?.origin ?? 'https://github.com';
  const github = githubClientId
    ? {
        clientId: githubClientId,
        ...(str('GITHUB_CLIENT_SECRET') ? { clientSecret: str('GITHUB_CLIENT_SECRET')! } : {}),
        authorizeUrl: `${githubBase}/login/oauth/authorize`,
        tokenUrl: `${githubBase}/login/oauth/access_token`,
        apiUrl: githubApi?.origin ?? 'https://api.github.com',
      }
    : undefined;
  if (isProduction && githubClientId && !str('GITHUB_CLIENT_SECRET')) {
    problems.push('GITHUB_CLIENT_SECRET: required when GITHUB_CLIENT_ID is set');
  }

  // UNVERIFIED_PRUNE_EXEMPT: addresses, compared case-insensitively. A typo here would let the
  // pruner delete the account it was meant to protect, so a non-address refuses to boot.
  const unverifiedPruneExempt = list('UNVERIFIED_PRUNE_EXEMPT').map((e) => e.toLowerCase());
  if (unverifiedPruneExempt.some((e) => !/^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(e))) {
    problems.push('UNVERIFIED_PRUNE_EXEMPT: must be a comma-separated list of email addresses');
  }

  // Registration.
  const allowedEmailDomains = list('REGISTRATION_ALLOWED_EMAIL_DOMAINS').map((d) =>
    d.toLowerCase().replace(/^@/, ''),
  );
  for (const d of allowedEmailDomains) {
    if (!/^[a-z0-9-]+(\.[a-z0-9-]+)+$/.test(d)) {
      problems.push('REGISTRATION_ALLOWED_EMAIL_DOMAINS: must be a comma-separated list of domain names');
      break;
    }
  }

  // Billing.
  const billingEnabled = bool('BILLING_ENABLED', false);
  const webhookSecret = str('BILLING_WEBHOOK_SECRET');
  if (isProduction && billingEnabled && webhookSecret === undefined) {
    problems.push('BILLING_WEBHOOK_SECRET: required in production when BILLING_ENABLED is true');
  }
  const priceRaw = str('BILLING_PRICE_MONTHLY_CENTS');
  const priceMonthlyCents = priceRaw === undefined ? null : nonNegInt('BILLING_PRICE_MONTHLY_CENTS', 0);
  const stripeSecretKey = str('BILLING_STRIPE_SECRET_KEY');
  if (stripeSecretKey !== undefined && !/^(sk|rk)_[A-Za-z0-9_]+$/.test(stripeSecretKey)) {
    problems.push('BILLING_STRIPE_SECRET_KEY: must be a Stripe secret or restricted key (sk_… or rk_…)');
  }
  if (isProduction && billingEnabled && stripeSecretKey === undefined) {
    problems.push('BILLING_STRIPE_SECRET_KEY: required in production when BILLING_ENABLED is true');
  }
  const stripeApiBase = url('BILLING_STRIPE_API_BASE', ['http:', 'https:']);
  if (stripeApiBase && (stripeApiBase.pathname !== '/' || stripeApiBase.search || stripeApiBase.hash)) {
    problems.push('BILLING_STRIPE_API_BASE: must be an origin without a path, query or fragment');
  }
  const stripePriceId = str('BILLING_STRIPE_PRICE_ID');
  if (stripePriceId !== undefined && !/^price_[A-Za-z0-9_]+$/.test(stripePriceId)) {
    problems.push('BILLING_STRIPE_PRICE_ID: must be a Stripe price id (price_…)');
  }
  const trialDays = intBetween('BILLING_TRIAL_DAYS', 14, 1, 365);

  // Proxies and origins.
  const trustedProxies = list('TRUSTED_PROXIES');
  if (trustedProxies.some((p) => !isValidCidr(p))) {
    problems.push('TRUSTED_PROXIES: must be a comma-separated list of IP addresses or CIDR ranges');
  }
  const checkOriginExtra: string[] = [];
  for (const o of list('CHECK_ORIGIN_EXTRA')) {
    try {
      const u = new URL(o);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('scheme');
      checkOriginExtra.push(u.origin);
    } catch {
      problems.push(
        'CHECK_ORIGIN_EXTRA: must be a comma-separated list of origins such as https://app.example.com',
      );
      break;
    }
  }

  // Metrics: default 9568 in production, off elsewhere unless set; 0 turns it off.
  let metricsPort: number | null = isProduction ? 9568 : null;
  const metricsRaw = str('METRICS_PORT');
  if (metricsRaw !== undefined) {
    if (metricsRaw === '0') metricsPort = null;
    else metricsPort = port('METRICS_PORT') ?? metricsPort;
  }
  if (metricsPort !== null && metricsPort === listenPort) {
    problems.push('METRICS_PORT: must differ from PORT (the metrics listener is private)');
  }

  // Legal: all four or none.
  const legalNames = [
    'LEGAL_ENTITY',
    'LEGAL_CONTACT_EMAIL',
    'LEGAL_JURISDICTION',
    'LEGAL_EFFECTIVE_DATE',
  ] as const;
  const legalValues = legalNames.map((n) => str(n));
  const legalSet = legalValues.filter((v) => v !== undefined).length;
  let legal: Config['legal'] = null;
  if (legalSet > 0 && legalSet < legalNames.length) {
    const missing = legalNames.filter((_, i) => legalValues[i] === undefined);
    problems.push(`${missing.join(', ')}: the four LEGAL_* variables must be set together or not at all`);
  } else if (legalSet === legalNames.length) {
    const contact = email('LEGAL_CONTACT_EMAIL');
    const date = legalValues[3]!;
    if (!/^\d{4}-\d{2}-\d{2}$/.test(date) || Number.isNaN(Date.parse(date))) {
      problems.push('LEGAL_EFFECTIVE_DATE: must be a date in the form YYYY-MM-DD');
    }
    legal = {
      entity: legalValues[0]!,
      contactEmail: contact ?? legalValues[1]!,
      jurisdiction: legalValues[2]!,
      effectiveDate: date,
    };
  }

  const intervalRaw = str('BACKUP_INTERVAL_SECONDS');
  const otel = url('OTEL_EXPORTER_OTLP_ENDPOINT', ['http:', 'https:']);
  const SAMPLERS = [
    'always_on',
    'always_off',
    'traceidratio',
    'parentbased_always_on',
    'parentbased_always_off',
    'parentbased_traceidratio',
  ];
  const samplerName = str('OTEL_TRACES_SAMPLER')?.toLowerCase() ?? 'parentbased_always_on';
  if (!SAMPLERS.includes(samplerName)) {
    problems.push(`OTEL_TRACES_SAMPLER: must be one of ${SAMPLERS.join(', ')}`);
  }
  const samplerArg = str('OTEL_TRACES_SAMPLER_ARG');
  let samplerRatio = 1;
  if (samplerArg !== undefined) {
    samplerRatio = Number(samplerArg);
    if (!/^(0(\.\d+)?|1(\.0+)?|\.\d+)$/.test(samplerArg) || !(samplerRatio >= 0 && samplerRatio <= 1)) {
      problems.push('OTEL_TRACES_SAMPLER_ARG: must be a number from 0 to 1');
      samplerRatio = 1;
    }
  }
  const tracesSampler = {
    parentBased: samplerName.startsWith('parentbased_'),
    ratio: samplerName.endsWith('always_off') ? 0 : samplerName.endsWith('traceidratio') ? samplerRatio : 1,
  };
  const dsnUrl = url('ERROR_TRACKING_DSN', ['http:', 'https:']);
  // A Sentry DSN: <scheme>://<public key>@<host>[/<path>]/<project id>.
  const dsnProject = dsnUrl?.pathname.replace(/\/+$/, '').split('/').pop() ?? '';
  const dsn = dsnUrl && dsnUrl.username !== '' && /^[\w-]+$/.test(dsnProject) ? dsnUrl : undefined;
  if (dsnUrl && !dsn) {
    problems.push('ERROR_TRACKING_DSN: must be a DSN of the form https://<public key>@<host>/<project id>');
  }

  // Git hosts of pushed branches and their pull requests.
  const HOST_RE = /^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:\d{1,5})?$/;
  const gitlabHosts = list('GITLAB_HOSTS').map((h) => h.toLowerCase());
  if (gitlabHosts.some((h) => !HOST_RE.test(h))) {
    problems.push('GITLAB_HOSTS: must be a comma-separated list of host names such as gitlab.example.com');
  }
  const gitApiUrls: Record<string, string> = {};
  for (const entry of list('GIT_HOST_API_URLS')) {
    const eq = entry.indexOf('=');
    const hostPart = eq > 0 ? entry.slice(0, eq).trim().toLowerCase() : '';
    let ok = HOST_RE.test(hostPart);
    if (ok) {
      try {
        const u = new URL(entry.slice(eq + 1).trim());
        ok = (u.protocol === 'http:' || u.protocol === 'https:') && !u.username && !u.password && !u.search;
        if (ok) gitApiUrls[hostPart] = u.toString().replace(/\/+$/, '');
      } catch {
        ok = false;
      }
    }
    if (!ok) {
      problems.push(
        'GIT_HOST_API_URLS: must be a comma-separated list of host=URL pairs such as github.example.com=https://github.example.com/api/v3',
      );
      break;
    }
  }

  const logLevel = str('LOG_LEVEL') ?? (nodeEnv === 'test' ? 'silent' : 'info');
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) {
    problems.push('LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, silent');
  }
  const rateLimitStore = str('RATE_LIMIT_STORE')?.toLowerCase() ?? 'memory';
  if (rateLimitStore !== 'memory' && rateLimitStore !== 'postgres') {
    problems.push('RATE_LIMIT_STORE: must be memory or postgres');
  }

  const logFormat = str('LOG_FORMAT') ?? 'auto';
  if (str('LOG_FORMAT') !== undefined && logFormat !== 'json' && logFormat !== 'pretty') {
    problems.push('LOG_FORMAT: must be json or pretty');
  }

  const config: Config = {
    nodeEnv,
    isProduction,
    port: listenPort,
    host,
    publicUrl: effectivePublicUrl,
    publicUrlConfigured: publicUrl !== undefined,
    httpsOnly: effectivePublicUrl.protocol === 'https:',
    dataDir: str('PADDOCK_DATA_DIR') ?? './.paddock',
    consoleDir: resolvePath(str('PADDOCK_CONSOLE_DIR') ?? DEFAULT_CONSOLE_DIR),
    logLevel,
    logFormat: logFormat as Config['logFormat'],
    ...(secretKeyBase ? { secretKeyBase } : {}),
    ...(masterSecretsKey ? { masterSecretsKey } : {}),
    ...(masterSecretsKeyPrevious ? { masterSecretsKeyPrevious } : {}),
    database: {
      ...(databaseUrl ? { url: databaseUrl.toString() } : {}),
      ssl: bool('DATABASE_SSL', true),
      sslVerify: bool('DATABASE_SSL_VERIFY', false),
      ...(sslCaFile ? { sslCaFile } : {}),
      poolMax: positiveInt('DATABASE_POOL_SIZE', 10),
    },
    sandbox: {
      ...(str('SANDBOX_TOKEN') ? { token: str('SANDBOX_TOKEN')! } : {}),
      ...(sandboxBaseUrl ? { baseUrl: sandboxBaseUrl.toString().replace(/\/$/, '') } : {}),
      timeoutMs: positiveInt('SANDBOX_TIMEOUT_MS', 30_000),
      idleTimeoutMinutes: nonNegInt('SANDBOX_IDLE_TIMEOUT_MINUTES', 60),
      maxLifetimeHours: nonNegInt('SANDBOX_MAX_LIFETIME_HOURS', 24),
      callbackUrl: callbackUrl ?? effectivePublicUrl,
      maxConcurrentPerUser: positiveInt('SANDBOX_MAX_CONCURRENT_PER_USER', 5),
      reach,
    },
    mail: {
      transport,
      ...(from ? { from } : {}),
      ...(supportEmail ? { supportEmail } : {}),
      retry: {
        baseMs: positiveInt('MAIL_RETRY_BASE_MS', 5_000),
        maxAttempts: positiveInt('MAIL_MAX_ATTEMPTS', 20),
      },
      perRecipientPerHour: positiveInt('MAIL_PER_RECIPIENT_PER_HOUR', 5),
    },
    oauth: { ...(github ? { github } : {}) },
    firstUserAdmin: bool('FIRST_USER_ADMIN', false),
    registration: { enabled: bool('REGISTRATION_ENABLED', true), allowedEmailDomains },
    billing: {
      enabled: billingEnabled,
      ...(webhookSecret ? { webhookSecret } : {}),
      priceMonthlyCents,
      ...(stripeSecretKey ? { stripeSecretKey } : {}),
      ...(stripeApiBase ? { stripeApiBase } : {}),
      ...(stripePriceId ? { stripePriceId } : {}),
      trialDays,
    },
    trustedProxies,
    checkOriginExtra,
    ...(str('CLUSTER_DNS_QUERY') ? { clusterDnsQuery: str('CLUSTER_DNS_QUERY')! } : {}),
    metricsPort,
    logOutputBudgetMb: nonNegInt('LOG_OUTPUT_BUDGET_MB', 50),
    unverifiedPrune: {
      afterDays: nonNegInt('UNVERIFIED_PRUNE_AFTER_DAYS', 30),
      exempt: unverifiedPruneExempt,
    },
    legal,
    ...(dsn ? { errorTrackingDsn: dsn.toString() } : {}),
    ...(otel ? { otelExporterOtlpEndpoint: otel.toString() } : {}),
    tracesSampler,
    backup: {
      retentionDays: nonNegInt('BACKUP_RETENTION_DAYS', 14),
      intervalSeconds: intervalRaw === undefined ? null : positiveInt('BACKUP_INTERVAL_SECONDS', 86_400),
    },
    ...(str('SERVICE_IMAGE_TAG') ? { serviceImageTag: str('SERVICE_IMAGE_TAG')! } : {}),
    rateLimit: {
      store: rateLimitStore === 'postgres' ? 'postgres' : 'memory',
      max: positiveInt('RATE_LIMIT_MAX', 300),
      windowSeconds: positiveInt('RATE_LIMIT_WINDOW_SECONDS', 60),
      authMax: positiveInt('AUTH_RATE_LIMIT_MAX', 10),
      loginFailureMax: positiveInt('LOGIN_FAILURE_MAX', 10),
      loginFailureWindowSeconds: positiveInt('LOGIN_FAILURE_WINDOW_SECONDS', 900),
    },
    shutdownGraceSeconds: positiveInt('SHUTDOWN_GRACE_SECONDS', 120),
    ownerLeaseSeconds: intBetween(
      'OWNER_LEASE_SECONDS',
      30,
      MIN_OWNER_LEASE_SECONDS,
      MAX_OWNER_LEASE_SECONDS,
    ),
    gitHosts: { gitlabHosts, apiUrls: gitApiUrls },
  };

  if (problems.length > 0) throw new ConfigError(problems);
  return { config: deepFreeze(config), warnings };
}

function deepFreeze<T>(value: T): T {
  if (
    value &&
    typeof value === 'object' &&
    !Object.isFrozen(value) &&
    !(value instanceof URL) &&
    !Buffer.isBuffer(value)
  ) {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
