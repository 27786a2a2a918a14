// The Environment resource: one schema for the API body, the manifest spec and the OpenAPI
// document. Limits and choices are documented in docs/resources.md.
import { z } from 'zod';
import { boundedMap } from '../http/json-bounds.ts';
import {
  envMap,
  envVarName,
  metadata,
  NAME_MAX,
  resourceName,
  text,
  timestamps,
} from '../resources/fields.ts';

export const PACKAGE_MANAGERS = ['apt', 'npm', 'pip'] as const;
export const SETUP_SCRIPT_MAX_BYTES = 64 * 1024;
export const REPOS_MAX = 20;
export const ALLOWED_HOSTS_MAX = 200;
export const ENV_VARS_MAX = 200;

// One package spec in the manager's own syntax (jq, ripgrep=14.1.0-1, typescript@5.4.5,
// requests>=2.31). Installs run as argv, never through a shell; a leading "-" would be an option.
const PACKAGE_SPEC_RE = /^[A-Za-z0-9@][A-Za-z0-9@/._+:=<>~^*,!-]*$/;

// One manager's specs: the stored form is one space-separated string; a list of specs (what
// YAML users write: `npm: [cowsay, typescript@5]`) is accepted and joined into it, so the
// stored and exported form stays the string.
const packageSpecs = z
  .union([z.string(), z.array(z.string()).max(1000, 'must have at most 1000 entries')])
  .transform((specs) => (Array.isArray(specs) ? specs.join(' ') : specs))
  .pipe(z.string().max(4096, 'must be at most 4096 characters'));

// Bounded before the entries are looked at: a map of 300,000 managers is one problem.
const packages = boundedMap(
  z.record(z.string(), packageSpecs).superRefine((map, ctx) => {
    for (const [manager, specs] of Object.entries(map)) {
      if (!(PACKAGE_MANAGERS as readonly string[]).includes(manager)) {
        ctx.addIssue({
          code: 'custom',
          path: [manager],
          message: `unsupported package manager; supported: ${PACKAGE_MANAGERS.join(', ')}`,
        });
        continue;
      }
      const bad = specs
        .trim()
        .split(/\s+/)
        .filter((t) => t !== '' && !PACKAGE_SPEC_RE.test(t));
      if (bad.length > 0) {
        ctx.addIssue({
          code: 'custom',
          path: [manager],
          message: `invalid package spec ${JSON.stringify(bad[0]?.slice(0, 100))}: use space-separated specs such as name or name@version`,
        });
      }
    }
  }),
  { maxEntries: PACKAGE_MANAGERS.length * 4, maxKeyLength: 100 },
).describe(
  'package manager (apt, npm, pip) → space-separated package specs or a list of them, e.g. {"npm": "typescript@5.4.5"} or {"npm": ["cowsay", "typescript@5.4.5"]}; stored and returned as the string',
);

/** Why a clone URL is refused, or null. https only: SSH and every other scheme are rejected. */
export function repoUrlProblem(raw: string): string | null {
  if (/^[\w.-]+@[\w.-]+:/.test(raw)) return 'SSH clone URLs are not supported: use an https:// URL';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'must be an https:// clone URL';
  }
  if (url.protocol !== 'https:') {
    return url.protocol === 'ssh:' || url.protocol === 'git+ssh:'
      ? 'SSH clone URLs are not supported: use an https:// URL'
      : 'must be an https:// clone URL';
  }
  if (url.hostname === '') return 'must name a host';
  if (url.username !== '' || url.password !== '')
    return 'must not carry credentials: store the token as a secret and name it in token_secret';
  if (url.search !== '' || url.hash !== '') return 'must not have a query or fragment';
  return null;
}

export const Repo = z
  .object({
    url: text(2048).superRefine((u, ctx) => {
      const problem = repoUrlProblem(u);
      if (problem) ctx.addIssue({ code: 'custom', message: problem });
    }),
    ref: text(255)
      .regex(/^[A-Za-z0-9._/-]+$/, 'must be a branch, tag or commit SHA')
      .refine((r) => !r.startsWith('-'), 'must not start with "-"')
      .optional()
      .describe('branch, tag or commit to check out; the default branch when omitted'),
    token_secret: envVarName
      .optional()
      .describe('key of an environment or vault secret holding an access token for a private repo'),
  })
  .strict();

const HOST_LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;

/** Domain syntax for allowed_hosts: lower-case labels, an optional leading "*." wildcard. */
export function hostProblem(host: string): string | null {
  if (host.length > 253) return 'must be at most 253 characters';
  const bare = host.startsWith('*.') ? host.slice(2) : host;
  const labels = bare.split('.');
  if (labels.length < 2 || !labels.every((l) => HOST_LABEL.test(l)))
    return 'must be a domain name such as api.github.com or *.github.com (lower case)';
  return null;
}

const networkingConfig = z
  .object({
    allowed_hosts: z
      .array(
        text(253).superRefine((h, ctx) => {
          const problem = hostProblem(h);
          if (problem) ctx.addIssue({ code: 'custom', message: problem });
        }),
      )
      .max(ALLOWED_HOSTS_MAX, `must have at most ${ALLOWED_HOSTS_MAX} entries`)
      .default([]),
  })
  .describe('only allowed_hosts is honoured; other keys are dropped');

export const NetworkingType = z.enum(['unrestricted', 'limited']);

/** Every mutable field. PUT replaces all of them; omitted optional fields reset to their defaults. */
export const EnvironmentBody = z
  .object({
    name: resourceName,
    env_vars: envMap(text(32 * 1024), ENV_VARS_MAX).default({}),
    packages: packages.default({}),
    repos: z.array(Repo).max(REPOS_MAX, `must have at most ${REPOS_MAX} entries`).default([]),
    setup_script: text(SETUP_SCRIPT_MAX_BYTES)
      .refine((s) => Buffer.byteLength(s, 'utf8') <= SETUP_SCRIPT_MAX_BYTES, 'must be at most 64 KiB')
      .nullable()
      .default(null),
    networking_type: NetworkingType.default('unrestricted'),
    networking_config: networkingConfig.default({ allowed_hosts: [] }),
    metadata: metadata.default({}),
  })
  .strict();

export type EnvironmentInput = z.output<typeof EnvironmentBody>;

export const EnvironmentView = z.object({
  id: z.string(),
  name: z.string().max(NAME_MAX),
  env_vars: z.record(z.string(), z.string()),
  packages: z.record(z.string(), z.string()),
  repos: z.array(
    z.object({ url: z.string(), ref: z.string().optional(), token_secret: z.string().optional() }),
  ),
  setup_script: z.string().nullable(),
  networking_type: NetworkingType,
  networking_config: z.object({ allowed_hosts: z.array(z.string()) }),
  metadata: z.record(z.string(), z.unknown()),
  checkpoint_id: z.string().nullable().describe('read-only; set when a checkpoint is created'),
  agent_count: z.number().int(),
  secret_count: z.number().int(),
  ...timestamps,
});

export type EnvironmentViewT = z.infer<typeof EnvironmentView>;
