// Bulk apply: the compiled manifest `{resources: [{kind, name, spec}]}` and its result.
// The envelope is checked by the route (422 when it is not a list of {kind, name, spec});
// each resource's kind, name and spec are checked one by one so that a bad resource is an
// `action: error` in the 200 body and never stops the others.
import { z } from 'zod';
import { agentFields, checkModelOfRuntime } from '../agents/agents.schema.ts';
import { EnvironmentBody } from '../environments/environments.schema.ts';
import { envMap, metadata, resourceName, text } from '../resources/fields.ts';
import { secretValue } from '../secrets/secrets.schemas.ts';

export const APPLY_MAX_RESOURCES = 500;
export const APPLY_BODY_LIMIT = 10 * 1024 * 1024;
export const SECRETS_PER_RESOURCE_MAX = 500;
/** Across the whole manifest: one request must not turn into an unbounded amount of crypto and writes. */
export const APPLY_MAX_SECRETS = 2000;
export const KINDS = ['Environment', 'Vault', 'Agent'] as const;
export type Kind = (typeof KINDS)[number];

const secrets = envMap(secretValue, SECRETS_PER_RESOURCE_MAX).describe(
  'KEY: value. Upserted; keys not listed are left as they are. Values are never echoed.',
);

export const EnvironmentSpec = EnvironmentBody.omit({ name: true })
  .extend({ secrets: secrets.optional() })
  .strict();

export const VaultSpec = z.object({ metadata: metadata.default({}), secrets: secrets.optional() }).strict();

const { name: _name, ...agentSpecFields } = agentFields;
export const AgentSpec = z
  .object({
    ...agentSpecFields,
    environment: resourceName
      .nullable()
      .default(null)
      .describe('environment name, in the manifest or existing'),
    vaults: z
      .array(resourceName)
      .max(50, 'must have at most 50 entries')
      .refine((v) => new Set(v).size === v.length, 'must not repeat a vault')
      .default([])
      .describe('vault allowlist, by name'),
  })
  .strict()
  .superRefine(checkModelOfRuntime);

export const ApplyBody = z
  .object({
    resources: z
      .array(
        z.object({
          kind: text(100).describe('Environment, Vault or Agent'),
          name: text(1000),
          spec: z.record(z.string(), z.unknown()).default({}),
        }),
      )
      .max(APPLY_MAX_RESOURCES, `must have at most ${APPLY_MAX_RESOURCES} resources`)
      .refine(
        (resources) =>
          resources.reduce((n, r) => {
            const secretsOf = r.spec['secrets'];
            return n + (secretsOf && typeof secretsOf === 'object' ? Object.keys(secretsOf).length : 0);
          }, 0) <= APPLY_MAX_SECRETS,
        `must hold at most ${APPLY_MAX_SECRETS} secrets in all; split the manifest`,
      ),
  })
  .strict();

export type ApplyRequest = z.output<typeof ApplyBody>;

export const SecretAction = z.enum(['created', 'updated', 'unchanged']);

export const ApplyResult = z.object({
  kind: z.string(),
  name: z.string(),
  action: z.enum(['created', 'updated', 'unchanged', 'error']),
  id: z.string().nullable(),
  code: z
    .string()
    .optional()
    .describe(
      'with action "error": the machine code, as in error responses (validation_failed, not_found, conflict, internal_error)',
    ),
  errors: z.record(z.string(), z.array(z.string())).optional(),
  more_errors: z.number().int().optional().describe('problems left out of errors (at most 20 are listed)'),
  secrets: z.record(z.string(), SecretAction).optional().describe('per-key outcome; never a value'),
});

export type ApplyResultT = z.infer<typeof ApplyResult>;

export const ApplyResponse = z.object({
  results: z.array(ApplyResult).describe('one per resource, in manifest order'),
  summary: z.object({
    created: z.number().int(),
    updated: z.number().int(),
    unchanged: z.number().int(),
    error: z.number().int(),
  }),
});

export type ApplyResponseT = z.infer<typeof ApplyResponse>;
