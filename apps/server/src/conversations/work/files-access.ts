// The two things every request into a live sandbox needs first (files, terminal): the
// conversation's live sandbox, and a redactor with the secret values its log is redacted with.
//
// What must hold (tests: test/work.files.test.ts, test/work.terminal.test.ts):
// 1. Tenant-scoped: another tenant's conversation answers 404 exactly like a missing one (the
//    query names the tenant; a malformed id is a 404 too).
// 2. Any replica serves the request: the sandbox is the conversation's row in status `ready`
//    (the owner's view of it), reached on the backend directly. Without one (never provisioned,
//    still provisioning, reclaimed after idle, terminated) the answer is 409
//    `sandbox_not_running`, saying how to wake it.
// 3. The redactor holds every value the conversation's log redactor holds (env-file.ts): the
//    environment's and the vault's secrets and those of the conversation's ancestors
//    (lineage-secrets.ts, self included), the account's inference keys, and the sandbox's
//    callback key — whose plaintext only the owner's memory and the sandbox hold, so it is read
//    from the sandbox's env file (`PADDOCK_TOKEN`). The values live in this request's memory only.
import type { SandboxClient } from '@paddock/sandbox-client';
import type { Principal } from '../../auth/principal.ts';
import type { Db } from '../../db/database.ts';
import { AppError } from '../../http/errors.ts';
import type { InferenceCredentialsService } from '../../inference-credentials/inference-credentials.service.ts';
import { isUuid } from '../../resources/fields.ts';
import type { SecretsService } from '../../secrets/secrets.service.ts';
import { createSecretRegistry, type SecretRegistry } from '../log/redactor.ts';
import { ENV_FILE_PATH } from '../provisioning/env-file.ts';
import { lineageSecretValues } from '../provisioning/lineage-secrets.ts';

/** The sandbox's home: every path of the files API is relative to it. */
export const SANDBOX_HOME = '/home/sandbox';
/** Paddock's own files in the home (env file, setup script, session state): never served. */
export const PADDOCK_DIR_NAME = '.paddock';

export interface WorkAccessDeps {
  db: Db;
  sandbox: SandboxClient;
  secrets: Pick<SecretsService, 'decryptOwner'>;
  inferenceCredentials: Pick<InferenceCredentialsService, 'forSandbox'>;
}

export interface LiveSandbox {
  conversationId: string;
  tenantId: string;
  /** The backend's name of the sandbox. */
  name: string;
}

/** How to wake a sandbox, in every `sandbox_not_running` answer. */
export function sandboxNotRunning(conversationId: string, state: string): AppError {
  return new AppError(
    'sandbox_not_running',
    `the conversation's sandbox is not running (${state}): send a prompt to wake it ` +
      `(POST /api/conversations/${conversationId}/prompts, \`paddock prompt ${conversationId} …\`, ` +
      'or the prompt box in the console), then try again',
    { extra: { sandbox_state: state } },
  );
}

/**
 * The conversation's ready sandbox. 404 for an id the tenant has not (invariant 1), 409
 * `sandbox_not_running` without a ready sandbox (invariant 2).
 */
export async function liveSandboxOf(db: Db, principal: Principal, id: string): Promise<LiveSandbox> {
  const notFound = AppError.notFound('conversation');
  if (!isUuid(id)) throw notFound;
  const row = await db
    .selectFrom('conversations as c')
    .leftJoin('sandboxes as s', (join) =>
      join
        .onRef('s.conversation_id', '=', 'c.id')
        .on('s.tenant_id', '=', principal.tenantId)
        .on('s.status', 'in', ['pending', 'starting', 'ready']),
    )
    .select(['c.id', 'c.status', 's.name as sandbox_name', 's.status as sandbox_status'])
    .where('c.tenant_id', '=', principal.tenantId)
    .where('c.id', '=', id)
    .executeTakeFirst();
  if (!row) throw notFound;
  if (row.sandbox_status !== 'ready' || !row.sandbox_name) {
    const state =
      row.status === 'terminated' || row.status === 'failed'
        ? `the conversation is ${row.status}`
        : row.sandbox_status
          ? `the sandbox is ${row.sandbox_status}`
          : 'no live sandbox: never provisioned, or reclaimed after being idle';
    if (row.status === 'terminated' || row.status === 'failed')
      throw new AppError(
        'sandbox_not_running',
        `the conversation's sandbox is gone (${state}): start a new conversation`,
        {
          extra: { sandbox_state: row.status },
        },
      );
    throw sandboxNotRunning(row.id, state);
  }
  return { conversationId: row.id, tenantId: principal.tenantId, name: row.sandbox_name };
}

/** The callback key in the sandbox's env file (`export PADDOCK_TOKEN='…'`), or null. */
function callbackKeyOf(envFile: string): string | null {
  const match = /^export PADDOCK_TOKEN='((?:[^']|'\\'')*)'$/m.exec(envFile);
  return match?.[1]?.replaceAll(`'\\''`, "'") ?? null;
}

/** A registry with every value the conversation's log redactor holds (invariant 3). */
export async function workRedactor(deps: WorkAccessDeps, live: LiveSandbox): Promise<SecretRegistry> {
  const registry = createSecretRegistry();
  const [lineage, credentials, envFile] = await Promise.all([
    lineageSecretValues(deps, live.tenantId, live.conversationId, { self: true }),
    deps.inferenceCredentials.forSandbox(live.tenantId),
    deps.sandbox
      .exec(live.name, {
        cmd: ['cat', '--', ENV_FILE_PATH],
        timeoutMs: 10_000,
        maxOutputBytes: 2 * 1024 * 1024,
      })
      .then(
        (result) => (result.exitCode === 0 ? result.stdout.toString('utf8') : ''),
        () => '',
      ),
  ]);
  const callbackKey = callbackKeyOf(envFile);
  registry.registerAll([
    ...lineage,
    ...credentials.map((c) => c.apiKey),
    ...(callbackKey ? [callbackKey] : []),
  ]);
  return registry;
}
