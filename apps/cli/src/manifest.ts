// Manifest files → the compiled form of POST /api/apply.
//   File form (multi-document YAML): apiVersion: paddock/v1, kind, metadata.name, spec;
//   secrets as a list of {key, value}; a secret value may reference the local environment
//   as `${env:NAME}` (so manifests can be committed without secrets). Anywhere else
//   `${env:NAME}` is refused: it would store the value in plain, readable config. `${VAR}`
//   without "env:" is left for the server (MCP substitution from secrets at spawn time).
//   Compiled form: {resources: [{kind, name, spec}]}, secrets as a KEY: value map, and
//   ownership fields (id, timestamps, counts) stripped.
import { parseAllDocuments } from 'yaml';
import type { Env } from './config.ts';
import { CliError } from './errors.ts';

export const API_VERSION = 'paddock/v1';
export const KINDS = ['Environment', 'Vault', 'Agent'] as const;

/** Read-only or server-owned fields a `paddock get -o json` output carries; never sent back. */
const OWNERSHIP_FIELDS = [
  'id',
  'tenant_id',
  'created_at',
  'updated_at',
  'agent_count',
  'secret_count',
  'conversation_count',
  'checkpoint_id',
];

export interface CompiledResource {
  kind: string;
  name: string;
  spec: Record<string, unknown>;
}

export interface Manifest {
  resources: CompiledResource[];
}

const ENV_REF = /\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}/g;

function resolveEnvRefs(value: unknown, env: Env, missing: Set<string>): unknown {
  if (typeof value === 'string') {
    return value.replace(ENV_REF, (match, name: string) => {
      const v = env[name];
      if (v === undefined) {
        missing.add(name);
        return match;
      }
      return v;
    });
  }
  if (Array.isArray(value)) return value.map((v) => resolveEnvRefs(v, env, missing));
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolveEnvRefs(v, env, missing)]));
  }
  return value;
}

/**
 * The first line of a YAML error ("… at line 4, column 1:"), without the colon that
 * introduces the quoted source: the source is left out, as it may hold a secret value.
 */
function yamlProblem(message: string | undefined): string {
  return (message ?? 'unreadable').split('\n')[0]!.replace(/:$/, '');
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return !!v && typeof v === 'object' && !Array.isArray(v);
}

/** Parses one or more YAML texts (each may hold several documents) into the compiled form. */
export function compileManifests(files: Array<{ path: string; text: string }>, env: Env): Manifest {
  const problems: string[] = [];
  const missing = new Set<string>();
  const resources: CompiledResource[] = [];
  for (const file of files) {
    const docs = parseAllDocuments(file.text, { prettyErrors: true });
    const list = Array.isArray(docs) ? docs : [docs];
    list.forEach((doc, i) => {
      const where = `${file.path} document ${i + 1}`;
      if (doc.errors.length > 0) {
        problems.push(`${where}: invalid YAML: ${yamlProblem(doc.errors[0]?.message)}`);
        return;
      }
      const value = doc.toJS({ maxAliasCount: 100 }) as unknown;
      if (value === null || value === undefined) return; // empty document (e.g. a trailing ---)
      if (!isRecord(value)) {
        problems.push(`${where}: must be a mapping with apiVersion, kind, metadata and spec`);
        return;
      }
      const label = `${where}${isRecord(value['metadata']) && typeof value['metadata']['name'] === 'string' ? ` (${value['metadata']['name']})` : ''}`;
      if (value['apiVersion'] !== API_VERSION) {
        problems.push(`${label}: apiVersion must be ${API_VERSION}`);
        return;
      }
      const kind = value['kind'];
      if (typeof kind !== 'string' || !(KINDS as readonly string[]).includes(kind)) {
        problems.push(`${label}: kind must be one of ${KINDS.join(', ')}`);
        return;
      }
      const metadata = value['metadata'];
      if (!isRecord(metadata) || typeof metadata['name'] !== 'string' || metadata['name'] === '') {
        problems.push(`${label}: metadata.name is required`);
        return;
      }
      const rawSpec = value['spec'] ?? {};
      if (!isRecord(rawSpec)) {
        problems.push(`${label}: spec must be a mapping`);
        return;
      }
      const spec: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(rawSpec)) if (!OWNERSHIP_FIELDS.includes(k)) spec[k] = v;
      if (spec['secrets'] !== undefined) {
        const entries = spec['secrets'];
        if (!Array.isArray(entries)) {
          problems.push(`${label}: spec.secrets must be a list of {key, value} entries`);
          return;
        }
        const map: Record<string, unknown> = {};
        for (const [j, entry] of entries.entries()) {
          if (!isRecord(entry) || typeof entry['key'] !== 'string' || !('value' in entry)) {
            problems.push(`${label}: spec.secrets[${j}] must be {key, value}`);
            continue;
          }
          if (typeof entry['value'] !== 'string') {
            problems.push(
              `${label}: spec.secrets[${j}] (${entry['key']}): value must be a string (quote it)`,
            );
            continue;
          }
          if (entry['key'] in map) problems.push(`${label}: spec.secrets: ${entry['key']} is listed twice`);
          map[entry['key']] = resolveEnvRefs(entry['value'], env, missing);
        }
        spec['secrets'] = map;
      }
      const { secrets: _secrets, ...plain } = spec;
      if (/\$\{env:/.test(JSON.stringify(plain))) {
        problems.push(
          `${label}: \${env:NAME} is only allowed in secret values (elsewhere it would be stored readable); reference a secret as \${NAME} instead`,
        );
        return;
      }
      resources.push({ kind, name: metadata['name'], spec });
    });
  }
  if (missing.size > 0) {
    problems.push(
      `undefined local environment ${missing.size === 1 ? 'variable' : 'variables'} referenced as \${env:NAME}: ${[...missing].sort().join(', ')}`,
    );
  }
  if (problems.length > 0) throw new CliError('the manifest is invalid', problems);
  return { resources };
}

/** The compiled plan with every secret value replaced, for --dry-run and logs. */
export function redactedPlan(manifest: Manifest): Manifest {
  return {
    resources: manifest.resources.map((r) => {
      if (!isRecord(r.spec['secrets'])) return r;
      const secrets = Object.fromEntries(Object.keys(r.spec['secrets']).map((k) => [k, '<redacted>']));
      return { ...r, spec: { ...r.spec, secrets } };
    }),
  };
}
