// The manifest's file form in the browser, as the CLI reads it (apps/cli/src/manifest.ts):
// YAML documents `{apiVersion: paddock/v1, kind, metadata.name, spec}`, secrets as a list of
// `{key, value}`. An exported secret is the placeholder `${env:KEY}`: the console has no
// environment to resolve it from, so the person types the value, or the secret is left out
// of the apply and its stored value stays (apply never deletes a secret).
import { parseAllDocuments, stringify } from 'yaml';

export interface ManifestDocument {
  apiVersion: string;
  kind: string;
  metadata: { name: string };
  spec: Record<string, unknown>;
}

export interface CompiledResource {
  kind: string;
  name: string;
  spec: Record<string, unknown>;
}

export const toYaml = (documents: ManifestDocument[]): string =>
  documents.map((d) => stringify(d, { lineWidth: 0 })).join('---\n');

const PLACEHOLDER = /^\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}$/;
const KINDS = ['Environment', 'Vault', 'Agent'];
const OWNERSHIP = [
  'id',
  'tenant_id',
  'created_at',
  'updated_at',
  'agent_count',
  'secret_count',
  'conversation_count',
  'checkpoint_id',
];

/**
 * The first line of a YAML error ("… at line 4, column 1:"), without the colon that
 * introduces the quoted source: the source is left out, as it may hold a secret value.
 */
const yamlProblem = (message: string | undefined): string =>
  (message ?? 'unreadable').split('\n')[0]!.replace(/:$/, '');

const isRecord = (v: unknown): v is Record<string, unknown> =>
  !!v && typeof v === 'object' && !Array.isArray(v);

export interface Parsed {
  resources: CompiledResource[];
  /** Placeholder names, in order of first appearance. */
  placeholders: string[];
  problems: string[];
}

/** Parses the YAML; secrets whose value is a placeholder are collected, not resolved. */
export function parseManifest(text: string): Parsed {
  const problems: string[] = [];
  const resources: CompiledResource[] = [];
  const placeholders: string[] = [];
  parseAllDocuments(text).forEach((doc, i) => {
    const where = `document ${i + 1}`;
    if (doc.errors.length > 0) {
      problems.push(`${where}: invalid YAML: ${yamlProblem(doc.errors[0]?.message)}`);
      return;
    }
    const value = doc.toJS({ maxAliasCount: 100 }) as unknown;
    if (value === null || value === undefined) return;
    if (!isRecord(value) || value['apiVersion'] !== 'paddock/v1') {
      problems.push(`${where}: must be a mapping with apiVersion: paddock/v1, kind, metadata and spec`);
      return;
    }
    const kind = value['kind'];
    const metadata = value['metadata'];
    if (typeof kind !== 'string' || !KINDS.includes(kind)) {
      problems.push(`${where}: kind must be one of ${KINDS.join(', ')}`);
      return;
    }
    if (!isRecord(metadata) || typeof metadata['name'] !== 'string' || !metadata['name']) {
      problems.push(`${where}: metadata.name is required`);
      return;
    }
    const raw = value['spec'] ?? {};
    if (!isRecord(raw)) {
      problems.push(`${where} (${metadata['name']}): spec must be a mapping`);
      return;
    }
    const spec: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(raw)) if (!OWNERSHIP.includes(k)) spec[k] = v;
    if (spec['secrets'] !== undefined) {
      if (!Array.isArray(spec['secrets'])) {
        problems.push(`${where} (${metadata['name']}): spec.secrets must be a list of {key, value}`);
        return;
      }
      const map: Record<string, string> = {};
      for (const entry of spec['secrets'] as unknown[]) {
        if (!isRecord(entry) || typeof entry['key'] !== 'string' || typeof entry['value'] !== 'string') {
          problems.push(
            `${where} (${metadata['name']}): each secret must be {key, value} with a string value`,
          );
          continue;
        }
        map[entry['key']] = entry['value'];
        const ref = PLACEHOLDER.exec(entry['value']);
        if (ref && !placeholders.includes(ref[1]!)) placeholders.push(ref[1]!);
      }
      spec['secrets'] = map;
    }
    resources.push({ kind, name: metadata['name'], spec });
  });
  return { resources, placeholders, problems };
}

/**
 * The body of POST /api/apply: placeholders replaced by the values typed in; a secret whose
 * placeholder was left empty is not sent (its stored value stays).
 */
export function resolveSecrets(
  resources: CompiledResource[],
  values: Record<string, string>,
): CompiledResource[] {
  return resources.map((r) => {
    const secrets = r.spec['secrets'];
    if (!isRecord(secrets)) return r;
    const kept: Record<string, string> = {};
    for (const [key, value] of Object.entries(secrets as Record<string, string>)) {
      const ref = PLACEHOLDER.exec(value);
      if (!ref) kept[key] = value;
      else if (values[ref[1]!]) kept[key] = values[ref[1]!]!;
    }
    const { secrets: _drop, ...rest } = r.spec;
    return { ...r, spec: Object.keys(kept).length > 0 ? { ...rest, secrets: kept } : rest };
  });
}

/** Fields of `next` that differ from `current` (canonical JSON), for the dry-run diff. */
export function changedFields(
  current: Record<string, unknown> | undefined,
  next: Record<string, unknown>,
): string[] {
  if (!current) return [];
  const canon = (v: unknown): string =>
    JSON.stringify(v, (_k, x: unknown) =>
      isRecord(x)
        ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
        : x,
    ) ?? 'null';
  const keys = new Set([...Object.keys(current), ...Object.keys(next)]);
  keys.delete('secrets');
  return [...keys].filter((k) => k in next && canon(current[k]) !== canon(next[k])).sort();
}
