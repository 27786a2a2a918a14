import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ConfigError, type Env, parseConfig } from './config.ts';
import { DEV_MASTER_KEY_FILE, loadConfig } from './load.ts';

const KEY = randomBytes(32).toString('base64url');
const PROD: Env = {
  NODE_ENV: 'production',
  PUBLIC_URL: 'https://paddock.example.com',
  MASTER_SECRETS_KEY: KEY,
  DATABASE_URL: 'postgres://u:p@db.example.com:5432/paddock',
  EMAIL_DELIVERY: 'none',
};

function problemsOf(env: Env): string[] {
  try {
    parseConfig(env);
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return [...err.problems];
  }
  return [];
}

function refuses(env: Env, variable: string): void {
  const problems = problemsOf(env);
  assert.ok(
    problems.some((p) => p.includes(variable)),
    `expected a problem naming ${variable}, got: ${JSON.stringify(problems)}`,
  );
}

describe('configuration', () => {
  it('boots in development with no variables at all, with documented defaults', () => {
    const { config } = parseConfig({});
    assert.equal(config.port, 4000);
    assert.equal(config.host, '127.0.0.1');
    assert.equal(config.metricsPort, null);
    assert.equal(config.sandbox.timeoutMs, 30_000);
    assert.equal(config.sandbox.idleTimeoutMinutes, 60);
    assert.equal(config.sandbox.maxLifetimeHours, 24);
    assert.equal(config.logOutputBudgetMb, 50);
    assert.equal(config.registration.enabled, true);
    assert.equal(config.billing.enabled, false);
    assert.equal(config.firstUserAdmin, false);
    assert.equal(config.database.ssl, true);
    assert.equal(config.dataDir, './.paddock');
    assert.equal(config.mail.transport.kind, 'none');
  });

  it('parses the production example and freezes the result', () => {
    const { config } = parseConfig(PROD);
    assert.equal(config.host, '0.0.0.0');
    assert.equal(config.metricsPort, 9568);
    assert.equal(config.httpsOnly, true);
    assert.equal(config.masterSecretsKey?.length, 32);
    assert.ok(Object.isFrozen(config));
    assert.ok(Object.isFrozen(config.sandbox));
    assert.throws(() => {
      (config as { port: number }).port = 1;
    });
  });

  it('treats a present-but-blank value as unset', () => {
    const { config } = parseConfig({ PORT: '', SANDBOX_MAX_LIFETIME_HOURS: '  ', BILLING_ENABLED: '' });
    assert.equal(config.port, 4000);
    assert.equal(config.sandbox.maxLifetimeHours, 24);
    assert.equal(config.billing.enabled, false);
  });

  for (const variable of ['PUBLIC_URL', 'MASTER_SECRETS_KEY', 'DATABASE_URL']) {
    it(`refuses to boot in production without ${variable}`, () => {
      refuses({ ...PROD, [variable]: undefined }, variable);
    });
  }

  it('refuses to boot in production without a mail setting', () => {
    refuses({ ...PROD, EMAIL_DELIVERY: undefined }, 'EMAIL_DELIVERY');
    assert.deepEqual(
      problemsOf({
        ...PROD,
        EMAIL_DELIVERY: undefined,
        SMTP_HOST: 'smtp.example.com',
        EMAIL_FROM: 'a@example.com',
      }),
      [],
    );
    assert.deepEqual(
      problemsOf({
        ...PROD,
        EMAIL_DELIVERY: undefined,
        EMAIL_PROVIDER_API_KEY: 'k',
        EMAIL_FROM: 'a@example.com',
      }),
      [],
    );
  });

  it('requires EMAIL_FROM in production when a real mail provider is set', () => {
    refuses({ ...PROD, EMAIL_DELIVERY: undefined, SMTP_HOST: 'smtp.example.com' }, 'EMAIL_FROM');
    refuses({ ...PROD, EMAIL_DELIVERY: undefined, EMAIL_PROVIDER_API_KEY: 'k' }, 'EMAIL_FROM');
  });

  it('requires BILLING_WEBHOOK_SECRET in production only when billing is on', () => {
    refuses({ ...PROD, BILLING_ENABLED: 'true' }, 'BILLING_WEBHOOK_SECRET');
    assert.deepEqual(
      problemsOf({
        ...PROD,
        BILLING_ENABLED: 'true',
        BILLING_WEBHOOK_SECRET: 'whsec_x',
        BILLING_STRIPE_SECRET_KEY: 'sk_test_x',
      }),
      [],
    );
    assert.deepEqual(problemsOf({ ...PROD, BILLING_ENABLED: 'false' }), []);
    assert.deepEqual(problemsOf({ BILLING_ENABLED: 'true' }), []);
  });

  it('requires BILLING_STRIPE_SECRET_KEY in production only when billing is on; development boots without it', () => {
    refuses(
      { ...PROD, BILLING_ENABLED: 'true', BILLING_WEBHOOK_SECRET: 'whsec_x' },
      'BILLING_STRIPE_SECRET_KEY',
    );
    const { config } = parseConfig({ BILLING_ENABLED: 'true' });
    assert.equal(config.billing.stripeSecretKey, undefined);
    assert.equal(config.billing.trialDays, 14);
  });

  it('refuses malformed billing variables naming the variable, never the value; blank means unset', () => {
    refuses({ BILLING_STRIPE_SECRET_KEY: 'pk_live_publishable' }, 'BILLING_STRIPE_SECRET_KEY');
    refuses({ BILLING_STRIPE_API_BASE: 'ftp://stripe.example' }, 'BILLING_STRIPE_API_BASE');
    refuses({ BILLING_STRIPE_API_BASE: 'http://127.0.0.1:1234/v1' }, 'BILLING_STRIPE_API_BASE');
    refuses({ BILLING_STRIPE_PRICE_ID: 'monthly' }, 'BILLING_STRIPE_PRICE_ID');
    refuses({ BILLING_TRIAL_DAYS: '0' }, 'BILLING_TRIAL_DAYS');
    refuses({ BILLING_TRIAL_DAYS: 'two weeks' }, 'BILLING_TRIAL_DAYS');
    assert.ok(!problemsOf({ BILLING_STRIPE_SECRET_KEY: 'pk_live_publishable' }).join().includes('pk_live'));
    const { config } = parseConfig({
      BILLING_STRIPE_SECRET_KEY: ' ',
      BILLING_STRIPE_API_BASE: '',
      BILLING_TRIAL_DAYS: '',
      BILLING_STRIPE_PRICE_ID: '',
    });
    assert.equal(config.billing.stripeSecretKey, undefined);
    assert.equal(config.billing.stripeApiBase, undefined);
    assert.equal(config.billing.stripePriceId, undefined);
    assert.equal(config.billing.trialDays, 14);
    const set = parseConfig({
      BILLING_STRIPE_SECRET_KEY: 'rk_test_abc',
      BILLING_STRIPE_API_BASE: 'http://127.0.0.1:12111',
      BILLING_TRIAL_DAYS: '30',
      BILLING_STRIPE_PRICE_ID: 'price_123',
    }).config;
    assert.equal(set.billing.stripeSecretKey, 'rk_test_abc');
    assert.equal(set.billing.stripeApiBase?.origin, 'http://127.0.0.1:12111');
    assert.equal(set.billing.trialDays, 30);
    assert.equal(set.billing.stripePriceId, 'price_123');
  });

  it('SANDBOX_CALLBACK_URL: the origin sandboxes call back to, PUBLIC_URL by default', () => {
    assert.equal(parseConfig(PROD).config.sandbox.callbackUrl.href, 'https://paddock.example.com/');
    assert.equal(parseConfig({ PORT: '4100' }).config.sandbox.callbackUrl.href, 'http://127.0.0.1:4100/');
    const { config } = parseConfig({ ...PROD, SANDBOX_CALLBACK_URL: 'http://paddock.internal:4000' });
    assert.equal(config.sandbox.callbackUrl.href, 'http://paddock.internal:4000/');
  });

  it('accepts the deprecated SERVICE_DOMAIN alias with a warning', () => {
    const { config, warnings } = parseConfig({
      ...PROD,
      PUBLIC_URL: undefined,
      SERVICE_DOMAIN: 'paddock.example.org',
    });
    assert.equal(config.publicUrl.origin, 'https://paddock.example.org');
    assert.ok(warnings.some((w) => w.includes('SERVICE_DOMAIN') && w.includes('deprecated')));
  });

  it('validates the MASTER_SECRETS_KEY form: 32 bytes, base64 URL-safe, no padding', () => {
    refuses({ MASTER_SECRETS_KEY: randomBytes(32).toString('base64') + 'x' }, 'MASTER_SECRETS_KEY');
    refuses({ MASTER_SECRETS_KEY: `${KEY}=` }, 'MASTER_SECRETS_KEY');
    refuses({ MASTER_SECRETS_KEY: randomBytes(16).toString('base64url') }, 'MASTER_SECRETS_KEY');
    refuses({ MASTER_SECRETS_KEY: `${KEY.slice(0, 42)}+` }, 'MASTER_SECRETS_KEY');
    // The last character of 43 must not carry non-zero padding bits.
    refuses({ MASTER_SECRETS_KEY: `${KEY.slice(0, 42)}B` }, 'MASTER_SECRETS_KEY');
  });

  it('accepts MASTER_SECRETS_KEY_PREVIOUS beside a different current key, for master key rotation', () => {
    const previous = randomBytes(32).toString('base64url');
    const { config } = parseConfig({ MASTER_SECRETS_KEY: KEY, MASTER_SECRETS_KEY_PREVIOUS: previous });
    assert.deepEqual(config.masterSecretsKeyPrevious, Buffer.from(previous, 'base64url'));
    assert.equal(parseConfig({ MASTER_SECRETS_KEY: KEY }).config.masterSecretsKeyPrevious, undefined);
    assert.equal(
      parseConfig({ MASTER_SECRETS_KEY: KEY, MASTER_SECRETS_KEY_PREVIOUS: ' ' }).config
        .masterSecretsKeyPrevious,
      undefined,
    );
    refuses(
      { MASTER_SECRETS_KEY: KEY, MASTER_SECRETS_KEY_PREVIOUS: `${previous}=` },
      'MASTER_SECRETS_KEY_PREVIOUS',
    );
    refuses({ MASTER_SECRETS_KEY: KEY, MASTER_SECRETS_KEY_PREVIOUS: KEY }, 'MASTER_SECRETS_KEY_PREVIOUS');
    refuses({ MASTER_SECRETS_KEY_PREVIOUS: previous }, 'MASTER_SECRETS_KEY_PREVIOUS');
  });

  it('never echoes a variable value in its error message', () => {
    const secret = 'super-secret-value-that-must-not-leak';
    const problems = problemsOf({
      MASTER_SECRETS_KEY: secret,
      DATABASE_URL: `nope ${secret}`,
      SMTP_PORT: secret,
    });
    assert.ok(problems.length >= 3);
    for (const p of problems) assert.ok(!p.includes(secret));
  });

  it('requires the four LEGAL_* variables together or not at all', () => {
    refuses({ LEGAL_ENTITY: 'Acme Ltd' }, 'LEGAL_CONTACT_EMAIL');
    refuses(
      { LEGAL_ENTITY: 'Acme', LEGAL_CONTACT_EMAIL: 'legal@acme.test', LEGAL_JURISDICTION: 'England' },
      'LEGAL_EFFECTIVE_DATE',
    );
    const { config } = parseConfig({
      LEGAL_ENTITY: 'Acme',
      LEGAL_CONTACT_EMAIL: 'legal@acme.test',
      LEGAL_JURISDICTION: 'England',
      LEGAL_EFFECTIVE_DATE: '2026-01-01',
    });
    assert.equal(config.legal?.entity, 'Acme');
    assert.equal(parseConfig({}).config.legal, null);
  });

  for (const variable of ['SANDBOX_IDLE_TIMEOUT_MINUTES', 'SANDBOX_MAX_LIFETIME_HOURS']) {
    it(`requires ${variable} to be a non-negative integer (0 disables)`, () => {
      for (const bad of ['abc', '-1', '1.5', '1e3', '0x10']) refuses({ [variable]: bad }, variable);
      const { config } = parseConfig({ [variable]: '0' });
      assert.equal(
        variable === 'SANDBOX_MAX_LIFETIME_HOURS'
          ? config.sandbox.maxLifetimeHours
          : config.sandbox.idleTimeoutMinutes,
        0,
      );
    });
  }

  it('limits live sandboxes per user to SANDBOX_MAX_CONCURRENT_PER_USER (default 5, a positive integer)', () => {
    assert.equal(parseConfig({}).config.sandbox.maxConcurrentPerUser, 5);
    assert.equal(
      parseConfig({ SANDBOX_MAX_CONCURRENT_PER_USER: '12' }).config.sandbox.maxConcurrentPerUser,
      12,
    );
    for (const bad of ['0', 'abc', '-1', '2.5'])
      refuses({ SANDBOX_MAX_CONCURRENT_PER_USER: bad }, 'SANDBOX_MAX_CONCURRENT_PER_USER');
  });

  it('validates numbers, booleans, ports and URLs by name', () => {
    refuses({ PORT: '70000' }, 'PORT');
    refuses({ METRICS_PORT: 'x' }, 'METRICS_PORT');
    refuses({ SANDBOX_TIMEOUT_MS: '0' }, 'SANDBOX_TIMEOUT_MS');
    refuses({ LOG_OUTPUT_BUDGET_MB: 'lots' }, 'LOG_OUTPUT_BUDGET_MB');
    refuses({ FIRST_USER_ADMIN: 'maybe' }, 'FIRST_USER_ADMIN');
    refuses({ REGISTRATION_ENABLED: 'perhaps' }, 'REGISTRATION_ENABLED');
    refuses({ DATABASE_SSL: 'sometimes' }, 'DATABASE_SSL');
    refuses({ DATABASE_URL: 'mysql://x' }, 'DATABASE_URL');
    refuses({ PUBLIC_URL: 'ftp://x' }, 'PUBLIC_URL');
    refuses({ PUBLIC_URL: 'https://x.example.com/app' }, 'PUBLIC_URL');
    refuses({ SANDBOX_BASE_URL: 'not a url' }, 'SANDBOX_BASE_URL');
    refuses({ SANDBOX_CALLBACK_URL: 'ftp://x' }, 'SANDBOX_CALLBACK_URL');
    refuses({ SANDBOX_CALLBACK_URL: 'http://paddock.internal:4000/api' }, 'SANDBOX_CALLBACK_URL');
    refuses({ EMAIL_DELIVERY: 'smtp' }, 'EMAIL_DELIVERY');
    refuses({ EMAIL_FROM: 'not-an-address' }, 'EMAIL_FROM');
    refuses({ BILLING_PRICE_MONTHLY_CENTS: '9.99' }, 'BILLING_PRICE_MONTHLY_CENTS');
    refuses({ UNVERIFIED_PRUNE_AFTER_DAYS: 'never' }, 'UNVERIFIED_PRUNE_AFTER_DAYS');
    refuses({ BACKUP_RETENTION_DAYS: 'x' }, 'BACKUP_RETENTION_DAYS');
    refuses({ RATE_LIMIT_MAX: '0' }, 'RATE_LIMIT_MAX');
    refuses({ LOG_LEVEL: 'loud' }, 'LOG_LEVEL');
    refuses({ LOG_FORMAT: 'xml' }, 'LOG_FORMAT');
    refuses({ LOG_FORMAT: 'auto' }, 'LOG_FORMAT');
    refuses({ PORT: '4000', METRICS_PORT: '4000' }, 'METRICS_PORT');
  });

  it('parses the mail retry policy (MAIL_RETRY_BASE_MS, MAIL_MAX_ATTEMPTS) with defaults', () => {
    assert.deepEqual(parseConfig({}).config.mail.retry, { baseMs: 5_000, maxAttempts: 20 });
    assert.deepEqual(parseConfig({ MAIL_RETRY_BASE_MS: '200', MAIL_MAX_ATTEMPTS: '3' }).config.mail.retry, {
      baseMs: 200,
      maxAttempts: 3,
    });
    refuses({ MAIL_RETRY_BASE_MS: '0' }, 'MAIL_RETRY_BASE_MS');
    refuses({ MAIL_MAX_ATTEMPTS: 'many' }, 'MAIL_MAX_ATTEMPTS');
  });

  it('parses AUTH_RATE_LIMIT_MAX, the per-minute budget of credential endpoints (default 10)', () => {
    assert.equal(parseConfig({}).config.rateLimit.authMax, 10);
    assert.equal(parseConfig({ AUTH_RATE_LIMIT_MAX: '3' }).config.rateLimit.authMax, 3);
    refuses({ AUTH_RATE_LIMIT_MAX: '0' }, 'AUTH_RATE_LIMIT_MAX');
  });

  it('parses RATE_LIMIT_STORE: memory (per node, the default; blank = unset) or postgres', () => {
    assert.equal(parseConfig({}).config.rateLimit.store, 'memory');
    assert.equal(parseConfig({ RATE_LIMIT_STORE: ' ' }).config.rateLimit.store, 'memory');
    assert.equal(parseConfig({ RATE_LIMIT_STORE: 'memory' }).config.rateLimit.store, 'memory');
    assert.equal(parseConfig({ RATE_LIMIT_STORE: 'postgres' }).config.rateLimit.store, 'postgres');
    assert.equal(parseConfig({ RATE_LIMIT_STORE: ' Postgres ' }).config.rateLimit.store, 'postgres');
    refuses({ RATE_LIMIT_STORE: 'redis' }, 'RATE_LIMIT_STORE');
    refuses({ RATE_LIMIT_STORE: 'pg' }, 'RATE_LIMIT_STORE');
  });

  it('parses the per-address sign-in throttle and the per-recipient mail cap (blank = default)', () => {
    const defaults = parseConfig({}).config;
    assert.equal(defaults.rateLimit.loginFailureMax, 10);
    assert.equal(defaults.rateLimit.loginFailureWindowSeconds, 900);
    assert.equal(defaults.mail.perRecipientPerHour, 5);
    const set = parseConfig({
      LOGIN_FAILURE_MAX: '4',
      LOGIN_FAILURE_WINDOW_SECONDS: '60',
      MAIL_PER_RECIPIENT_PER_HOUR: '2',
    }).config;
    assert.equal(set.rateLimit.loginFailureMax, 4);
    assert.equal(set.rateLimit.loginFailureWindowSeconds, 60);
    assert.equal(set.mail.perRecipientPerHour, 2);
    assert.equal(parseConfig({ LOGIN_FAILURE_MAX: '  ' }).config.rateLimit.loginFailureMax, 10);
    refuses({ LOGIN_FAILURE_MAX: '0' }, 'LOGIN_FAILURE_MAX');
    refuses({ LOGIN_FAILURE_WINDOW_SECONDS: '15m' }, 'LOGIN_FAILURE_WINDOW_SECONDS');
    refuses({ MAIL_PER_RECIPIENT_PER_HOUR: '-1' }, 'MAIL_PER_RECIPIENT_PER_HOUR');
  });

  it('parses the unverified-account pruner settings: UNVERIFIED_PRUNE_EXEMPT holds email addresses only', () => {
    assert.deepEqual(parseConfig({}).config.unverifiedPrune, { afterDays: 30, exempt: [] });
    assert.deepEqual(
      parseConfig({
        UNVERIFIED_PRUNE_AFTER_DAYS: '0',
        UNVERIFIED_PRUNE_EXEMPT: ' Ops@Example.com, ,qa@example.org ',
      }).config.unverifiedPrune,
      { afterDays: 0, exempt: ['ops@example.com', 'qa@example.org'] },
    );
    assert.deepEqual(parseConfig({ UNVERIFIED_PRUNE_EXEMPT: '  ' }).config.unverifiedPrune.exempt, []);
    // A typo would leave the account it was meant to protect to the pruner: refused at boot.
    refuses({ UNVERIFIED_PRUNE_EXEMPT: 'ops@example.com,opsexample.com' }, 'UNVERIFIED_PRUNE_EXEMPT');
    refuses({ UNVERIFIED_PRUNE_AFTER_DAYS: '-1' }, 'UNVERIFIED_PRUNE_AFTER_DAYS');
  });

  it('parses OWNER_LEASE_SECONDS, how long a hung owner keeps its conversations (default 30, 5 to 3600)', () => {
    assert.equal(parseConfig({}).config.ownerLeaseSeconds, 30);
    assert.equal(parseConfig({ OWNER_LEASE_SECONDS: '  ' }).config.ownerLeaseSeconds, 30);
    assert.equal(parseConfig({ OWNER_LEASE_SECONDS: '5' }).config.ownerLeaseSeconds, 5);
    assert.equal(parseConfig({ OWNER_LEASE_SECONDS: ' 3600 ' }).config.ownerLeaseSeconds, 3600);
    for (const bad of ['4', '0', '3601', '-10', '7.5', '30s', 'abc'])
      refuses({ OWNER_LEASE_SECONDS: bad }, 'OWNER_LEASE_SECONDS');
    const problems = problemsOf({ OWNER_LEASE_SECONDS: '4' });
    assert.deepEqual(problems, ['OWNER_LEASE_SECONDS: must be an integer from 5 to 3600']);
  });

  it('reports every problem at once', () => {
    const problems = problemsOf({ PORT: 'x', SANDBOX_MAX_LIFETIME_HOURS: 'abc', FIRST_USER_ADMIN: 'y' });
    assert.equal(problems.length, 3);
  });

  it('validates TRUSTED_PROXIES as IPs or CIDR ranges and CHECK_ORIGIN_EXTRA as origins', () => {
    refuses({ TRUSTED_PROXIES: '10.0.0.0/33' }, 'TRUSTED_PROXIES');
    refuses({ TRUSTED_PROXIES: 'proxy.local' }, 'TRUSTED_PROXIES');
    const { config } = parseConfig({
      TRUSTED_PROXIES: '10.0.0.0/8, 192.168.1.7,fd00::/8',
      CHECK_ORIGIN_EXTRA: 'https://a.example.com, http://localhost:5173',
    });
    assert.deepEqual(config.trustedProxies, ['10.0.0.0/8', '192.168.1.7', 'fd00::/8']);
    assert.deepEqual(config.checkOriginExtra, ['https://a.example.com', 'http://localhost:5173']);
    refuses({ CHECK_ORIGIN_EXTRA: 'not an origin' }, 'CHECK_ORIGIN_EXTRA');
  });

  it('reads GITLAB_HOSTS and GIT_HOST_API_URLS (blank is unset; malformed refuses, naming the variable)', () => {
    const { config } = parseConfig({
      GITLAB_HOSTS: 'GitLab.Example.com, git.corp:8443',
      GIT_HOST_API_URLS: 'ghe.corp=https://ghe.corp/api/v3/, git.test=http://127.0.0.1:9999',
    });
    assert.deepEqual(config.gitHosts.gitlabHosts, ['gitlab.example.com', 'git.corp:8443']);
    assert.deepEqual(config.gitHosts.apiUrls, {
      'ghe.corp': 'https://ghe.corp/api/v3',
      'git.test': 'http://127.0.0.1:9999',
    });
    assert.deepEqual(parseConfig({ GITLAB_HOSTS: ' ', GIT_HOST_API_URLS: '' }).config.gitHosts, {
      gitlabHosts: [],
      apiUrls: {},
    });
    refuses({ GITLAB_HOSTS: 'https://gitlab.example.com' }, 'GITLAB_HOSTS');
    refuses({ GIT_HOST_API_URLS: 'ghe.corp' }, 'GIT_HOST_API_URLS');
    refuses({ GIT_HOST_API_URLS: 'ghe.corp=ftp://x' }, 'GIT_HOST_API_URLS');
    refuses({ GIT_HOST_API_URLS: 'ghe.corp=https://user:pw@ghe.corp/api' }, 'GIT_HOST_API_URLS');
  });

  it('selects the mail transport: none, provider API key, or SMTP on 587 by default', () => {
    assert.equal(parseConfig({ EMAIL_DELIVERY: 'none', SMTP_HOST: 'x' }).config.mail.transport.kind, 'none');
    assert.equal(parseConfig({ EMAIL_PROVIDER_API_KEY: 'k' }).config.mail.transport.kind, 'api');
    const smtp = parseConfig({ SMTP_HOST: 'smtp.example.com' }).config.mail.transport;
    assert.deepEqual(smtp, { kind: 'smtp', host: 'smtp.example.com', port: 587 });
  });

  it('turns the metrics listener on in development only when METRICS_PORT is set, and off with 0', () => {
    assert.equal(parseConfig({ METRICS_PORT: '9100' }).config.metricsPort, 9100);
    assert.equal(parseConfig({ ...PROD, METRICS_PORT: '0' }).config.metricsPort, null);
  });
});

describe('development master key', () => {
  it('is generated once, kept in the data directory with mode 600, and reused with a warning', () => {
    const dir = mkdtempSync(join(tmpdir(), 'paddock-cfg-'));
    const first = loadConfig({ PADDOCK_DATA_DIR: dir });
    const file = join(dir, DEV_MASTER_KEY_FILE);
    assert.equal(statSync(file).mode & 0o777, 0o600);
    assert.ok(first.warnings.some((w) => w.includes('MASTER_SECRETS_KEY') && w.includes('DEVELOPMENT')));
    const second = loadConfig({ PADDOCK_DATA_DIR: dir });
    assert.ok(first.config.masterSecretsKey?.equals(second.config.masterSecretsKey!));
    assert.equal(readFileSync(file, 'utf8').trim(), first.config.masterSecretsKey?.toString('base64url'));
    rmSync(dir, { recursive: true, force: true });
  });

  it('is never generated in production', () => {
    const dir = mkdtempSync(join(tmpdir(), 'paddock-cfg-'));
    assert.throws(
      () => loadConfig({ ...PROD, MASTER_SECRETS_KEY: undefined, PADDOCK_DATA_DIR: dir }),
      /MASTER_SECRETS_KEY/,
    );
    rmSync(dir, { recursive: true, force: true });
  });

  it('uses MASTER_SECRETS_KEY when given, without touching the data directory', () => {
    const dir = join(tmpdir(), `paddock-none-${Date.now()}`);
    const { config, warnings } = loadConfig({ MASTER_SECRETS_KEY: KEY, PADDOCK_DATA_DIR: dir });
    assert.equal(config.masterSecretsKey?.toString('base64url'), KEY);
    assert.equal(warnings.length, 0);
  });
});

describe('telemetry (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_TRACES_SAMPLER*, ERROR_TRACKING_DSN)', () => {
  it('is off by default; blank means unset', () => {
    const { config } = parseConfig({
      OTEL_EXPORTER_OTLP_ENDPOINT: ' ',
      ERROR_TRACKING_DSN: '',
      OTEL_TRACES_SAMPLER: ' ',
      OTEL_TRACES_SAMPLER_ARG: '',
    });
    assert.equal(config.otelExporterOtlpEndpoint, undefined);
    assert.equal(config.errorTrackingDsn, undefined);
    assert.deepEqual(config.tracesSampler, { parentBased: true, ratio: 1 });
  });

  it('reads the sampler as the OpenTelemetry specification names it', () => {
    const sampler = (env: Env) => parseConfig(env).config.tracesSampler;
    assert.deepEqual(sampler({ OTEL_TRACES_SAMPLER: 'always_off' }), { parentBased: false, ratio: 0 });
    assert.deepEqual(sampler({ OTEL_TRACES_SAMPLER: 'Always_On' }), { parentBased: false, ratio: 1 });
    assert.deepEqual(
      sampler({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' }),
      { parentBased: true, ratio: 0.25 },
    );
    assert.deepEqual(sampler({ OTEL_TRACES_SAMPLER: 'traceidratio' }), { parentBased: false, ratio: 1 });
    // The argument counts for the ratio samplers only.
    assert.deepEqual(sampler({ OTEL_TRACES_SAMPLER_ARG: '0.5' }), { parentBased: true, ratio: 1 });
  });

  it('refuses a malformed value, naming the variable and never the value', () => {
    for (const [variable, value] of [
      ['OTEL_EXPORTER_OTLP_ENDPOINT', 'grpc://collector-secret:4317'],
      ['OTEL_TRACES_SAMPLER', 'sometimes-secret'],
      ['OTEL_TRACES_SAMPLER_ARG', '1.5'],
      ['OTEL_TRACES_SAMPLER_ARG', 'half'],
      ['ERROR_TRACKING_DSN', 'https://errors.example.com/secret-17'],
      ['ERROR_TRACKING_DSN', 'https://key@errors.example.com/'],
    ] as const) {
      const problems = problemsOf({ [variable]: value });
      assert.ok(
        problems.some((p) => p.startsWith(`${variable}:`)),
        `${variable}=${value}: ${JSON.stringify(problems)}`,
      );
      assert.ok(!problems.join('\n').includes('secret'), `${variable}: the value is echoed`);
    }
  });
});

describe('docs/configuration.md', () => {
  it('documents every variable the configuration reads', () => {
    const source = readFileSync(new URL('./config.ts', import.meta.url), 'utf8');
    const docs = readFileSync(new URL('../../../../docs/configuration.md', import.meta.url), 'utf8');
    const read = new Set(
      [
        ...source.matchAll(
          /\b(?:str|bool|nonNegInt|positiveInt|intBetween|port|url|email|list)\('([A-Z][A-Z0-9_]+)'/g,
        ),
      ].map((m) => m[1]!),
    );
    assert.ok(read.size > 40, `found only ${read.size} variables: the pattern no longer matches config.ts`);
    const missing = [...read].filter((name) => !docs.includes(`\`${name}\``));
    assert.deepEqual(missing, []);
  });
});

describe('what sandboxes can reach (SANDBOXD_SERVICE_ROUTES, SANDBOXD_EGRESS_ALLOW_CIDRS)', () => {
  it('reads both as sandboxd does; blank means unset', () => {
    const { config } = parseConfig({
      SANDBOXD_SERVICE_ROUTES:
        'paddock.internal=127.0.0.1:4000, Gateway.Internal=[::1]:4555 lan.test=10.1.2.3:80',
      SANDBOXD_EGRESS_ALLOW_CIDRS: '10.20.0.0/16 fd12:3456::/48, 192.168.1.7',
    });
    assert.deepEqual(config.sandbox.reach.serviceRoutes, [
      { name: 'paddock.internal', ip: '127.0.0.1', port: 4000 },
      { name: 'gateway.internal', ip: '::1', port: 4555 },
      { name: 'lan.test', ip: '10.1.2.3', port: 80 },
    ]);
    assert.deepEqual(
      config.sandbox.reach.egressAllowCidrs.map((c) => [c.address, c.prefix, c.family]),
      [
        ['10.20.0.0', 16, 'ipv4'],
        ['fd12:3456::', 48, 'ipv6'],
        ['192.168.1.7', 32, 'ipv4'],
      ],
    );
    const blank = parseConfig({ SANDBOXD_SERVICE_ROUTES: '  ', SANDBOXD_EGRESS_ALLOW_CIDRS: '' }).config;
    assert.deepEqual(blank.sandbox.reach, { serviceRoutes: [], egressAllowCidrs: [] });
  });

  it('a malformed value refuses to boot, naming the variable and the entry, never the value', () => {
    for (const bad of [
      'gateway=127.0.0.1:4555',
      'a.test=127.0.0.1',
      'a.test=localhost:80',
      'a.test=1.2.3.4:0',
    ]) {
      refuses({ SANDBOXD_SERVICE_ROUTES: `ok.test=127.0.0.1:1 ${bad}` }, 'SANDBOXD_SERVICE_ROUTES: entry 2');
    }
    for (const bad of [
      '10.0.0.0/33',
      'ten.0.0.0/8',
      '127.0.0.0/8',
      '0.0.0.0/0',
      '::1',
      'fe80::/10',
      '169.254.169.254',
    ]) {
      const problems = problemsOf({ SANDBOXD_EGRESS_ALLOW_CIDRS: bad });
      assert.equal(problems.length, 1, `${bad}: ${JSON.stringify(problems)}`);
      assert.match(problems[0] ?? '', /^SANDBOXD_EGRESS_ALLOW_CIDRS: entry 1 /);
      assert.ok(!problems[0]?.includes(bad), problems[0]);
    }
  });
});
