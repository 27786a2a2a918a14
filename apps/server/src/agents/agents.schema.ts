// The Agent resource. Field names the spec leaves open (environment_id, vault_ids, the skill
// pin `ref`) and every limit are documented in docs/resources.md.
import { z } from 'zod';
import { boundedMap } from '../http/json-bounds.ts';
import {
  envMap,
  metadata,
  resourceName,
  STORABLE_MESSAGE,
  storable,
  text,
  timestamps,
} from '../resources/fields.ts';
import { modelMismatch } from './agents.models.ts';

export const RUNTIMES = ['claude', 'codex', 'gemini', 'opencode'] as const;
export const Runtime = z.enum(RUNTIMES);

export const SKILLS_MAX = 50;
export const SKILL_CONTENT_MAX_BYTES = 256 * 1024;
export const MCP_SERVERS_MAX = 50;
export const VAULTS_MAX = 50;
export const DELEGATES_MAX = 50;

/** `<model_provider>/<model_id>`; the model id may itself contain slashes (openrouter/meta/llama-3). */
export const MODEL_RE = /^[a-z0-9][a-z0-9._-]*\/[A-Za-z0-9][A-Za-z0-9._:@+/-]*$/;

export const Model = z
  .string()
  .max(200, 'must be at most 200 characters')
  .regex(MODEL_RE, 'must have the form <provider>/<model_id>, e.g. anthropic/claude-sonnet-4-5');

const SKILL_NAME_RE = /^[a-z0-9][a-z0-9-]{0,63}$/;
const SOURCE_RE = /^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})\/[A-Za-z0-9._-]{1,100}$/;
const REF_RE = /^[A-Za-z0-9._/-]{1,200}$/;

/**
 * A skill is inline `{name, content}` (content is a full SKILL.md) or source-based
 * `{source: 'owner/repo', ref}` where `ref` (tag, branch or commit SHA) is required.
 * One object schema with cross-field checks, so every problem names its own field.
 */
export const Skill = z
  .object({
    name: z
      .string()
      .optional()
      .describe('inline skill: directory name of the SKILL.md (lower-case, digits, -)'),
    content: z.string().optional().describe('inline skill: the full SKILL.md'),
    source: z.string().optional().describe('source skill: GitHub owner/repo'),
    ref: z.string().optional().describe('source skill: required tag, branch or commit SHA pin'),
  })
  .strict()
  .superRefine((s, ctx) => {
    const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
    if (s.source !== undefined) {
      if (s.name !== undefined || s.content !== undefined)
        issue('source', 'a skill is either inline {name, content} or {source, ref}, not both');
      if (!SOURCE_RE.test(s.source) || s.source.includes('..'))
        issue('source', 'must have the form owner/repo');
      if (s.ref === undefined) issue('ref', 'a ref or commit SHA pin is required for a source skill');
      else if (!REF_RE.test(s.ref) || s.ref.startsWith('-') || s.ref.includes('..'))
        issue('ref', 'must be a tag, branch or commit SHA');
      return;
    }
    if (s.ref !== undefined) issue('ref', 'is only allowed on a source skill');
    if (s.name === undefined) issue('name', 'is required (or give source and ref)');
    else if (!SKILL_NAME_RE.test(s.name))
      issue('name', 'must be 1-64 lower-case letters, digits or "-", starting with a letter or digit');
    if (s.content === undefined) issue('content', 'is required for an inline skill');
    else if (!storable(s.content)) issue('content', STORABLE_MESSAGE);
    else if (Buffer.byteLength(s.content, 'utf8') > SKILL_CONTENT_MAX_BYTES)
      issue('content', 'must be at most 256 KiB');
  });

export const McpServer = z
  .object({
    command: text(1000).min(1, 'must not be empty'),
    args: z.array(text(4096)).max(100, 'must have at most 100 entries').default([]),
    env: envMap(text(32 * 1024), 100).default({}),
  })
  .strict();

const MCP_NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

// Bounded before any server is validated: the entry cap and name lengths come first.
const mcpServers = boundedMap(
  z.record(z.string(), McpServer).superRefine((map, ctx) => {
    for (const n of Object.keys(map)) {
      if (!MCP_NAME_RE.test(n))
        ctx.addIssue({
          code: 'custom',
          path: [n],
          message: 'server name must be 1-64 letters, digits, "_" or "-"',
        });
    }
  }),
  { maxEntries: MCP_SERVERS_MAX, maxKeyLength: 64 },
);

const skills = z
  .array(Skill)
  .max(SKILLS_MAX, `must have at most ${SKILLS_MAX} entries`)
  .superRefine((list, ctx) => {
    const seen = new Set<string>();
    list.forEach((s, i) => {
      const id = s.name ?? s.source;
      if (id === undefined) return;
      if (seen.has(id)) ctx.addIssue({ code: 'custom', path: [i], message: `duplicate skill ${id}` });
      seen.add(id);
    });
  });

/**
 * The model must be one the runtime can run (agents.models.ts), reported on `model`. For the
 * write schemas only: stored agents that break the rule still read back.
 */
export function checkModelOfRuntime(
  agent: { runtime: z.infer<typeof Runtime>; model: string },
  ctx: z.RefinementCtx,
): void {
  const problem = modelMismatch(agent.runtime, agent.model);
  if (problem) ctx.addIssue({ code: 'custom', path: ['model'], message: problem });
}

/** Fields shared by the API body and the manifest spec (which names references differently). */
export const agentFields = {
  name: resourceName,
  model: Model,
  runtime: Runtime,
  system: text(100 * 1024)
    .nullable()
    .default(null),
  description: text(2000).nullable().default(null),
  skills: skills.default([]),
  mcp_servers: mcpServers.default({}),
  metadata: metadata.default({}),
};

const uuid = z
  .string()
  .regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i, 'must be a UUID');

/** Every mutable field. PUT replaces all of them; omitted optional fields reset to their defaults. */
export const AgentBody = z
  .object({
    ...agentFields,
    environment_id: uuid.nullable().default(null).describe('an environment of the same tenant'),
    vault_ids: z
      .array(uuid)
      .max(VAULTS_MAX, `must have at most ${VAULTS_MAX} entries`)
      .refine(
        (ids) => new Set(ids.map((i) => i.toLowerCase())).size === ids.length,
        'must not repeat a vault',
      )
      .default([])
      .describe('vault allowlist: vaults a conversation of this agent may use'),
    delegate_agent_ids: z
      .array(uuid)
      .max(DELEGATES_MAX, `must have at most ${DELEGATES_MAX} entries`)
      .refine(
        (ids) => new Set(ids.map((i) => i.toLowerCase())).size === ids.length,
        'must not repeat an agent',
      )
      .default([])
      .describe(
        "agents of the same tenant on which this agent's sandboxes may start sub-conversations " +
          "beyond those on its own environment (with any vault on that agent's allowlist); docs/security.md",
      ),
  })
  .strict()
  .superRefine(checkModelOfRuntime);

export type AgentInput = z.output<typeof AgentBody>;

export const AgentView = z.object({
  id: z.string(),
  name: z.string(),
  model: z.string(),
  runtime: Runtime,
  environment_id: z.string().nullable(),
  vault_ids: z.array(z.string()),
  delegate_agent_ids: z.array(z.string()),
  system: z.string().nullable(),
  description: z.string().nullable(),
  skills: z.array(
    z.object({
      name: z.string().optional(),
      content: z.string().optional(),
      source: z.string().optional(),
      ref: z.string().optional(),
    }),
  ),
  mcp_servers: z.record(
    z.string(),
    z.object({ command: z.string(), args: z.array(z.string()), env: z.record(z.string(), z.string()) }),
  ),
  metadata: z.record(z.string(), z.unknown()),
  conversation_count: z.number().int().describe('always 0 until conversations exist'),
  ...timestamps,
});

export type AgentViewT = z.infer<typeof AgentView>;

const bool = z.enum(['true', 'false']);

export const AgentListQuery = z.object({
  search: text(200).optional().describe('case-insensitive substring of name or description'),
  runtime: Runtime.optional(),
  environment_id: z.string().max(200).optional(),
  has_skills: bool.optional(),
  has_mcp: bool.optional(),
});
