/**
 * The commands of the `packages` provisioning stage, from an environment's `packages` map
 * (environments.schema.ts: manager → space-separated package specs).
 *
 * Invariants (packages.test.ts):
 * - Tenant input only ever becomes whole argv entries: no shell, no string interpolation.
 * - Every spec is checked against its manager's grammar before any command is built: a spec that could be
 *   read as an option (`-o…`, `--…`), holds shell syntax (`jq; rm -rf /`) or anything else outside the
 *   grammar is refused with a message naming the manager and the spec. (The schema checks a looser form on
 *   write; this check stands on its own, for rows written by older versions.)
 * - Order: apt first (one `apt-get update`, then one install), then npm, then pip — system libraries before
 *   the language packages that may build against them.
 * - apt runs as the sandbox's root (sandboxd `user=root`); npm and pip run as the sandbox user, whose global
 *   prefix and user site (~/.local, on PATH) hold them: the files belong to the user the turns run as, and
 *   they install the same way on every backend, with or without writable system directories.
 */
import { AppError } from '../../http/errors.ts';

export const PACKAGES_TIMEOUT_MS = 300_000;

export type PackageManager = 'apt' | 'npm' | 'pip';

export interface PackageCommand {
  manager: PackageManager;
  argv: string[];
  env: Record<string, string>;
  user: 'root' | 'sandbox';
  timeoutMs: number;
}

/**
 * Debian package: name (lowercase, `+.-`), optional `:arch`, then optionally `=version` or `/release`.
 * Versions: digits, letters, `.+~:-` (an epoch's `:` included).
 */
const APT_SPEC =
  /^[a-z0-9][a-z0-9+.-]*(?::[a-z0-9-]+)?(?:=[A-Za-z0-9][A-Za-z0-9.+~:-]*|\/[a-z0-9][a-z0-9.-]*)?$/;
/** npm: optional `@scope/`, a name, optionally `@version-or-range-or-tag` (no spaces: specs are split on them). */
const NPM_SPEC =
  /^(?:@[A-Za-z0-9][A-Za-z0-9._~-]*\/)?[A-Za-z0-9][A-Za-z0-9._~-]*(?:@[A-Za-z0-9.^~*+<>=|_-][A-Za-z0-9.^~*+<>=|_-]*)?$/;
/** pip (PEP 508 subset): a project name, then optionally comma-separated version clauses (`==1.2`, `>=1,<2`). */
const PIP_CLAUSE = '(?:===|==|!=|~=|>=|<=|<|>)[A-Za-z0-9][A-Za-z0-9.*+!_-]*';
const PIP_SPEC = new RegExp(
  `^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?(?:${PIP_CLAUSE}(?:,${PIP_CLAUSE})*)?$`,
);

const GRAMMAR: Record<PackageManager, { re: RegExp; example: string }> = {
  apt: { re: APT_SPEC, example: 'jq or jq=1.6-2.1' },
  npm: { re: NPM_SPEC, example: 'cowsay or typescript@5.4.5' },
  pip: { re: PIP_SPEC, example: 'six or six==1.16.0' },
};

const ORDER: readonly PackageManager[] = ['apt', 'npm', 'pip'];

/** Longest spec accepted (the schema bounds the whole value at 4096 characters). */
const SPEC_MAX = 214;

function specsOf(manager: PackageManager, value: string): string[] {
  const specs = value.trim().split(/\s+/).filter(Boolean);
  for (const spec of specs) {
    if (spec.length > SPEC_MAX || !GRAMMAR[manager].re.test(spec)) {
      throw AppError.validation(
        { [`packages.${manager}`]: [`invalid package spec ${JSON.stringify(spec.slice(0, 100))}`] },
        `packages.${manager}: invalid package spec ${JSON.stringify(spec.slice(0, 100))}; use space-separated specs such as ${GRAMMAR[manager].example}`,
      );
    }
  }
  return specs;
}

/**
 * The commands the `packages` stage runs, in order; empty when there is nothing to install. Throws
 * AppError `validation_failed` for an unknown manager or a spec outside its manager's grammar.
 */
export function packageCommands(packages: Readonly<Record<string, string>>): PackageCommand[] {
  for (const manager of Object.keys(packages)) {
    if (!(ORDER as readonly string[]).includes(manager)) {
      throw AppError.validation(
        { packages: [`unsupported package manager ${JSON.stringify(manager.slice(0, 100))}`] },
        `packages: unsupported package manager ${JSON.stringify(manager.slice(0, 100))}; supported: ${ORDER.join(', ')}`,
      );
    }
  }
  const commands: PackageCommand[] = [];
  const timeoutMs = PACKAGES_TIMEOUT_MS;
  for (const manager of ORDER) {
    const value = packages[manager];
    if (value === undefined) continue;
    const specs = specsOf(manager, value);
    if (specs.length === 0) continue;
    switch (manager) {
      case 'apt': {
        const env = { DEBIAN_FRONTEND: 'noninteractive' };
        commands.push({ manager, argv: ['apt-get', '-q', 'update'], env, user: 'root', timeoutMs });
        commands.push({
          manager,
          argv: ['apt-get', '-q', 'install', '-y', '--no-install-recommends', ...specs],
          env,
          user: 'root',
          timeoutMs,
        });
        break;
      }
      case 'npm':
        commands.push({
          manager,
          argv: ['npm', 'install', '--global', '--no-fund', '--no-audit', '--no-update-notifier', ...specs],
          env: {},
          user: 'sandbox',
          timeoutMs,
        });
        break;
      case 'pip':
        commands.push({
          manager,
          argv: ['python3', '-m', 'pip', 'install', '--no-input', '--disable-pip-version-check', ...specs],
          // Debian marks its Python externally managed (PEP 668); installs land in the user's ~/.local.
          env: { PIP_BREAK_SYSTEM_PACKAGES: '1' },
          user: 'sandbox',
          timeoutMs,
        });
        break;
    }
  }
  return commands;
}
