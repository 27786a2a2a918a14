// Machine-oriented summaries of the API, generated from the served OpenAPI document (so
// they never drift from the routes): /llms.txt (the index), /llms-full.txt (every operation
// with its parameters, body fields and answers) and /skill (a drop-in SKILL.md teaching an
// agent to drive Paddock, including sub-conversations with its callback key).

interface Schema {
  type?: string | string[];
  description?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  enum?: unknown[];
  anyOf?: Schema[];
  oneOf?: Schema[];
  additionalProperties?: Schema | boolean;
  $ref?: string;
}
interface Operation {
  summary?: string;
  description?: string;
  operationId?: string;
  tags?: string[];
  security?: unknown[];
  parameters?: { name: string; in: string; required?: boolean; description?: string; schema?: Schema }[];
  requestBody?: { content?: Record<string, { schema?: Schema }> };
  responses?: Record<string, { description?: string; content?: Record<string, { schema?: Schema }> }>;
}
export interface OpenApiDoc {
  info?: { title?: string; description?: string; version?: string };
  paths?: Record<string, Record<string, Operation>>;
}

const METHODS = ['get', 'post', 'put', 'patch', 'delete'];

function operations(doc: OpenApiDoc) {
  const out: { method: string; path: string; op: Operation }[] = [];
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    for (const method of METHODS) {
      const op = item[method];
      if (op) out.push({ method: method.toUpperCase(), path, op });
    }
  }
  return out;
}

/** A one-line type of a JSON schema: `string`, `"a" | "b"`, `{ id, name }[]`. */
function typeOf(schema: Schema | undefined, depth = 0): string {
  if (!schema) return 'any';
  if (schema.enum) return schema.enum.map((v) => JSON.stringify(v)).join(' | ');
  const variants = schema.anyOf ?? schema.oneOf;
  if (variants) return [...new Set(variants.map((s) => typeOf(s, depth)))].join(' | ');
  const types = [schema.type ?? 'any'].flat();
  return types
    .map((t) => {
      if (t === 'array') return `${typeOf(schema.items, depth)}[]`;
      if (t === 'object' && schema.properties) {
        if (depth >= 1) return `{ ${Object.keys(schema.properties).join(', ')} }`;
        return `{ ${Object.entries(schema.properties)
          .map(([k, v]) => `${k}${schema.required?.includes(k) ? '' : '?'}: ${typeOf(v, depth + 1)}`)
          .join(', ')} }`;
      }
      if (t === 'object' && typeof schema.additionalProperties === 'object')
        return `map of ${typeOf(schema.additionalProperties, depth + 1)}`;
      return t;
    })
    .join(' | ');
}

function fields(schema: Schema | undefined, indent = '  '): string[] {
  if (!schema?.properties) return schema ? [`${indent}${typeOf(schema)}`] : [];
  return Object.entries(schema.properties).map(
    ([k, v]) =>
      `${indent}- ${k}${schema.required?.includes(k) ? '' : ' (optional)'}: ${typeOf(v, 1)}${v.description ? ` — ${v.description}` : ''}`,
  );
}

const isPublic = (op: Operation) => Array.isArray(op.security) && op.security.length === 0;

export function llmsTxt(doc: OpenApiDoc, baseUrl: string): string {
  const lines = [
    `# ${doc.info?.title ?? 'Paddock API'}`,
    '',
    `> ${doc.info?.description ?? ''}`,
    '',
    `Base URL: ${baseUrl}. JSON in and out under /api/. Authenticate with \`Authorization: Bearer <API key>\` (create one with \`POST /api/auth/token\` or in the console). Errors are \`{"error": "<code>", "message": "..."}\`. Lists are \`{"data": [...]}\`, paginated ones add \`meta: {next_cursor, has_more}\`.`,
    '',
    '## Documents',
    '',
    `- [Full API summary](${baseUrl}/llms-full.txt): every operation with its parameters, body and answers`,
    `- [OpenAPI 3.1 document](${baseUrl}/api/openapi.json)`,
    `- [Agent skill](${baseUrl}/skill): a SKILL.md that teaches an agent to drive this API`,
    '',
    '## Operations',
    '',
  ];
  let tag = '';
  for (const { method, path, op } of operations(doc).sort((a, b) =>
    (a.op.tags?.[0] ?? '').localeCompare(b.op.tags?.[0] ?? ''),
  )) {
    const t = op.tags?.[0] ?? 'other';
    if (t !== tag) {
      tag = t;
      lines.push(`### ${t}`, '');
    }
    lines.push(`- \`${method} ${path}\`${isPublic(op) ? ' (public)' : ''}: ${op.summary ?? ''}`);
  }
  lines.push('');
  return lines.join('\n');
}

export function llmsFullTxt(doc: OpenApiDoc, baseUrl: string): string {
  const lines = [llmsTxt(doc, baseUrl).split('## Operations')[0]!.trimEnd(), '', '## Operations in full', ''];
  for (const { method, path, op } of operations(doc)) {
    lines.push(`### ${method} ${path}`, '');
    if (op.summary) lines.push(op.summary, '');
    if (op.description && op.description !== op.summary) lines.push(op.description, '');
    lines.push(isPublic(op) ? 'Auth: none (public).' : 'Auth: Bearer API key (or the console session).', '');
    const params = op.parameters ?? [];
    if (params.length) {
      lines.push('Parameters:');
      for (const p of params)
        lines.push(
          `  - ${p.name} (${p.in}${p.required ? ', required' : ''}): ${typeOf(p.schema)}${p.description ? ` — ${p.description}` : ''}`,
        );
      lines.push('');
    }
    const body = op.requestBody?.content?.['application/json']?.schema;
    if (body) lines.push('Body (JSON):', ...fields(body), '');
    const answers = Object.entries(op.responses ?? {});
    if (answers.length) {
      lines.push('Answers:');
      for (const [status, r] of answers) {
        const schema = r.content?.['application/json']?.schema;
        const shape = status.startsWith('2') && schema ? `: ${typeOf(schema)}` : '';
        lines.push(`  - ${status}${shape}`);
      }
      lines.push('');
    }
  }
  return lines.join('\n');
}

export function skillMd(doc: OpenApiDoc, baseUrl: string): string {
  const ops = operations(doc);
  const conversationOps = ops
    .filter(({ path }) => path.startsWith('/api/conversations') || path.startsWith('/api/agents'))
    .map(({ method, path, op }) => `- \`${method} ${path}\` — ${op.summary ?? ''}`);
  return `---
name: paddock
description: Drive Paddock, the platform that runs AI coding agents in isolated sandboxes, through its HTTP API - list agents, start conversations (including sub-conversations from inside a Paddock sandbox), follow their live log, send follow-up prompts, interrupt or terminate them.
---

# Paddock

Paddock runs coding agents in sandboxes. An **agent** is a saved configuration (runtime,
model, system prompt, environment); a **conversation** runs an agent in its own sandbox over
one or more **turns**, and its output streams back live.

## Credentials

- Inside a Paddock sandbox, use the environment variables Paddock sets:
  \`PADDOCK_BASE_URL\` (the service address) and \`PADDOCK_TOKEN\` (this conversation's
  callback key). This key reads this conversation and the sub-conversations it started
  (and theirs), starts sub-conversations with what this sandbox holds (agents on this
  agent's environment, this conversation's vault or none, unless the owner delegated more
  agents), and interrupts, terminates or deletes the ones it started; it cannot prompt, and
  it expires when this conversation's server stops.
- Elsewhere, use \`${baseUrl}\` and an API key from \`POST /api/auth/token\` (email and
  password in, key out) or the console's API keys page.

Send \`Authorization: Bearer $PADDOCK_TOKEN\` on every request; bodies are JSON.

## Start a sub-conversation

\`\`\`sh
# Which agent am I? (agent_id, vault_id; other agents' ids come from the owner)
curl -s -H "Authorization: Bearer $PADDOCK_TOKEN" "$PADDOCK_BASE_URL/api/conversations/$PADDOCK_CONVERSATION_ID"

# Start one (201: the conversation, status "pending")
curl -s -X POST -H "Authorization: Bearer $PADDOCK_TOKEN" -H 'content-type: application/json' \\
  -d '{"agent_id": "<agent id>", "prompt": "Write the tests for src/parser.ts"}' \\
  "$PADDOCK_BASE_URL/api/conversations"

# Wait until it is done: poll until status is "idle" (turn ended), "failed" or "terminated"
curl -s -H "Authorization: Bearer $PADDOCK_TOKEN" "$PADDOCK_BASE_URL/api/conversations/<id>"

# Read its output (JSON pages; pass meta.next_cursor as after= for the next page)
curl -s -H "Authorization: Bearer $PADDOCK_TOKEN" \\
  "$PADDOCK_BASE_URL/api/conversations/<id>/events?streams=stdout,stderr&limit=1000"

# Or follow it live (server-sent events; ?wait=false returns what exists, then ends)
curl -sN -H "Authorization: Bearer $PADDOCK_TOKEN" "$PADDOCK_BASE_URL/api/conversations/<id>/stream"
\`\`\`

The sub-conversation is listed with \`source: "sandbox"\` and \`parent_conversation_id\` set to
this conversation. \`vault_id\` (optional) must be this conversation's vault and on the agent's
vault allowlist. 403 \`agent_not_delegated\` / \`vault_not_delegated\`: that agent or vault is
not this sandbox's to use. At most 3 levels of sub-conversations (403
\`sub_conversation_depth_exceeded\`) and 3 running at once per conversation (429
\`sub_conversation_limit_exceeded\`: terminate one you no longer need, or wait). Stop one with
\`POST $PADDOCK_BASE_URL/api/conversations/<id>/terminate\`.

## Rules of the road

- Statuses: \`pending\` → \`running\` → \`idle\` (turn ended, send a follow-up with
  \`POST /api/conversations/<id>/prompts\` using a full API key), or \`failed\`/\`terminated\`.
- 409 \`conversation_busy\`: a turn is still running — wait. 410 \`conversation_terminated\`:
  stop retrying. 429: honour \`Retry-After\`. 503 \`conversation_provisioning\`: retry after
  \`Retry-After\` seconds.
- Log output is redacted of secrets (\`[REDACTED]\`); never try to print or exfiltrate them.
- Every error is \`{"error": "<code>", "message": "..."}\`; 422 adds \`errors: {field: [..]}\`.

## Endpoints for agents and conversations

${conversationOps.join('\n')}

Everything else: ${baseUrl}/llms-full.txt and the OpenAPI document at ${baseUrl}/api/openapi.json.
`;
}
