// The runtime's on-disk session state, carried across sandboxes ("the agent forgot everything"
// is the failure this prevents).
//
// Invariants:
// - What is stored is the tar.gz of the adapter's sessionPaths, sealed with the tenant key
//   (AES-256-GCM bound to tenant, conversation and purpose: secrets/envelope.ts): the database
//   never holds the plaintext, and a blob copied to another conversation or tenant does not open.
// - At most SESSION_STATE_MAX_BYTES (compressed) is kept; a larger state is not saved and the
//   caller gets a SessionStateTooLarge with a sentence to show, the previous state stays.
// - Saving writes only with the owner's epoch (a fenced owner's save changes nothing).
// - Paths that do not exist are skipped; when none exists nothing is saved (the previous state,
//   if any, stays).
import type { SandboxClient } from '@paddock/sandbox-client';
import { sql } from 'kysely';
import type { Db } from '../../db/database.ts';
import type { SecretsService } from '../../secrets/secrets.service.ts';
import { type OwnerLease, StaleOwnerError } from '../contracts.ts';

export const SESSION_STATE_MAX_BYTES = 64 * 1024 * 1024;
const SAVE_TIMEOUT_MS = 120_000;
const NOTHING_TO_SAVE = 3;

export class SessionStateTooLarge extends Error {
  constructor(limit: number) {
    super(
      `the runtime's session state is larger than ${Math.round(limit / 1024 / 1024)} MiB compressed and was not saved: the next sandbox starts a new session`,
    );
    this.name = 'SessionStateTooLarge';
  }
}

// $@: the session paths relative to /. Only the ones that exist are archived.
const SAVE_SCRIPT = [
  'cd / || exit 1',
  'n=$#; i=0',
  'while [ "$i" -lt "$n" ]; do p=$1; shift; if [ -e "$p" ]; then set -- "$@" "$p"; fi; i=$((i+1)); done',
  `[ "$#" -eq 0 ] && exit ${NOTHING_TO_SAVE}`,
  'exec tar -czf - -- "$@"',
].join('\n');

function relative(paths: string[]): string[] {
  return paths.map((p) => p.replace(/^\/+/, '')).filter((p) => p !== '' && !p.split('/').includes('..'));
}

export interface SessionStateStore {
  /** `signal` cancels the save (its exec ends; nothing is stored): the call rejects with its reason. */
  save(input: {
    lease: OwnerLease;
    sandboxName: string;
    sessionPaths: string[];
    signal?: AbortSignal;
  }): Promise<boolean>;
  restore(input: { lease: OwnerLease; sandboxName: string }): Promise<boolean>;
}

export function createSessionStateStore(deps: {
  db: Db;
  sandbox: SandboxClient;
  secrets: Pick<SecretsService, 'sealBlob' | 'openBlob'>;
  maxBytes?: number;
}): SessionStateStore {
  const maxBytes = deps.maxBytes ?? SESSION_STATE_MAX_BYTES;
  const binding = (lease: OwnerLease) =>
    ({ tenantId: lease.tenantId, conversationId: lease.conversationId, purpose: 'session-state' }) as const;

  return {
    async save({ lease, sandboxName, sessionPaths, signal }) {
      const paths = relative(sessionPaths);
      if (paths.length === 0) return false;
      const result = await deps.sandbox.exec(sandboxName, {
        cmd: ['sh', '-c', SAVE_SCRIPT, 'paddock-session-save', ...paths],
        timeoutMs: SAVE_TIMEOUT_MS,
        maxOutputBytes: maxBytes,
        ...(signal ? { signal } : {}),
      });
      if (result.exitCode === NOTHING_TO_SAVE) return false;
      if (result.stdoutTruncated) throw new SessionStateTooLarge(maxBytes);
      if (result.exitCode !== 0) {
        throw new Error(`saving the session state failed (tar exit ${result.exitCode})`);
      }
      const sealed = await deps.secrets.sealBlob(binding(lease), result.stdout);
      const updated = await deps.db
        .updateTable('conversations')
        .set({ session_state: sealed, session_state_at: sql<Date>`now()` })
        .where('id', '=', lease.conversationId)
        .where('tenant_id', '=', lease.tenantId)
        .where('owner_epoch', '=', lease.epoch)
        .executeTakeFirst();
      if (Number(updated.numUpdatedRows) === 0) throw new StaleOwnerError(lease.conversationId);
      return true;
    },

    async restore({ lease, sandboxName }) {
      const row = await deps.db
        .selectFrom('conversations')
        .select('session_state')
        .where('id', '=', lease.conversationId)
        .where('tenant_id', '=', lease.tenantId)
        .executeTakeFirst();
      if (!row?.session_state) return false;
      const archive = await deps.secrets.openBlob(binding(lease), row.session_state);
      const result = await deps.sandbox.exec(sandboxName, {
        cmd: ['tar', '-xzf', '-', '-C', '/'],
        stdin: archive,
        timeoutMs: SAVE_TIMEOUT_MS,
        maxOutputBytes: 64 * 1024,
      });
      if (result.exitCode !== 0) {
        throw new Error(
          `restoring the session state failed (tar exit ${result.exitCode}): ${result.stderr.toString('utf8').slice(0, 500)}`,
        );
      }
      return true;
    },
  };
}
