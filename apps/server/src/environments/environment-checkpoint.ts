// Environment checkpoints: `POST /api/environments/:id/checkpoint` runs the cold path
// (packages, network, clone, setup) in a fresh sandbox, checkpoints its filesystem and stores the
// id on the environment, so later conversations on it take the warm path (checkpoint_restore).
//
// Invariants:
// - The build sandbox is the tenant's (`paddock-<tenant8>-<hex8>`) and is destroyed whatever
//   happens, also when this process dies mid-build (its destroy is queued before it is created,
//   due after BUILD_SANDBOX_DEADLINE_MS: destroy-queue.ts). It has no conversation, no callback
//   key and no vault: only the environment's own env_vars and secrets.
// - Secrets never end up in the checkpoint through us: no env file is written, and
//   /home/sandbox/.paddock (the setup script) is removed before the copy. (What the setup script
//   itself writes to disk is the tenant's choice.)
// - Output is redacted with the environment's secrets before it is reported.
// - The id is stored only if the environment's packages, repos and setup script are still the
//   ones the build used; otherwise the checkpoint would describe an older environment: 409.
// - Changing packages, repos or setup_script clears checkpoint_id (environments.repo.ts).
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { SandboxClient } from '@paddock/sandbox-client';
import { sql } from 'kysely';
import type { StageEvent } from '../conversations/contracts.ts';
import { createSecretRegistry } from '../conversations/log/redactor.ts';
import type { DestroyQueue } from '../conversations/provisioning/destroy-queue.ts';
import type { ColdPathInput, EnvironmentRow } from '../conversations/provisioning/provisioner.ts';
import type { Db } from '../db/database.ts';
import { AppError } from '../http/errors.ts';
import type { Logger } from '../observability/logger.ts';
import type { ResourceContext } from '../resources/context.ts';
import { isUuid } from '../resources/fields.ts';
import type { SecretsService } from '../secrets/secrets.service.ts';
import { findEnvironmentForProvisioning } from './environments.repo.ts';
import type { EnvironmentViewT } from './environments.schema.ts';
import type { EnvironmentsService } from './environments.service.ts';

/** One line of the NDJSON progress stream. */
export type CheckpointEvent =
  | { type: 'stage'; stage: string; state: StageEvent['state']; duration_ms?: number; message?: string }
  | { type: 'stdout' | 'stderr'; text: string }
  | { type: 'done'; environment: EnvironmentViewT }
  | { type: 'error'; error: string; message: string };

export interface EnvironmentCheckpoints {
  /** Builds the checkpoint; `onEvent` sees the progress. Throws AppError on failure. */
  build(
    ctx: ResourceContext,
    id: string,
    onEvent?: (event: CheckpointEvent) => void,
  ): Promise<EnvironmentViewT>;
}

/**
 * Longer than any build can take (every stage has its client-side timeout: at most 3 package
 * managers × 300 s, 20 repos × 600 s, setup 120 s): a build sandbox still there after this was
 * left by a process that died.
 */
export const BUILD_SANDBOX_DEADLINE_MS = 6 * 3_600_000;

export function buildSandboxName(tenantId: string): string {
  return `paddock-${tenantId.replaceAll('-', '').slice(0, 8)}-${randomBytes(4).toString('hex')}`;
}

export function createEnvironmentCheckpoints(deps: {
  db: Db;
  sandbox: SandboxClient;
  secrets: Pick<SecretsService, 'decryptOwner'>;
  environments: Pick<EnvironmentsService, 'get'>;
  coldPath(input: ColdPathInput): Promise<void>;
  /** The build sandbox's destroy: retried until the backend confirms it. */
  destroys: DestroyQueue;
  logger: Logger;
}): EnvironmentCheckpoints {
  const { db, sandbox, logger } = deps;
  return {
    async build(ctx, id, onEvent = () => {}) {
      const row = isUuid(id) ? await findEnvironmentForProvisioning(db, ctx.tenantId, id) : undefined;
      if (!row) throw AppError.notFound('environment');
      const environment: EnvironmentRow = row;
      const secrets = await deps.secrets.decryptOwner(ctx.tenantId, { kind: 'environment', id }, db);
      const registry = createSecretRegistry();
      registry.registerAll(Object.values(secrets));
      const redactors = { stdout: registry.stream(), stderr: registry.stream() };
      const emit = (stream: 'stdout' | 'stderr', bytes: Buffer) => {
        if (bytes.length > 0) onEvent({ type: stream, text: bytes.toString('utf8') });
      };
      const flush = () => {
        emit('stdout', redactors.stdout.flush());
        emit('stderr', redactors.stderr.flush());
      };
      const sink: ColdPathInput['sink'] = {
        output(stream, chunk) {
          emit(stream, redactors[stream].write(chunk));
        },
        async stage(event) {
          flush();
          onEvent({
            type: 'stage',
            stage: event.stage,
            state: event.state,
            ...(event.durationMs !== undefined ? { duration_ms: event.durationMs } : {}),
            ...(event.message ? { message: registry.redact(event.message).toString('utf8') } : {}),
          });
        },
      };
      const name = buildSandboxName(ctx.tenantId);
      // No row names a build sandbox: its destroy is owed before it exists, in case this process
      // dies before the `finally` below destroys it (destroy-queue.ts).
      await deps.destroys.owe(ctx.tenantId, name, BUILD_SANDBOX_DEADLINE_MS);
      let checkpointId: string;
      try {
        const t0 = performance.now();
        await sink.stage({ stage: 'provision', state: 'started' });
        try {
          await sandbox.create(name);
        } catch (err) {
          logger.warn({ err }, 'checkpoint build: sandbox create failed');
          await sink.stage({
            stage: 'provision',
            state: 'failed',
            durationMs: Math.round(performance.now() - t0),
            message: 'the sandbox could not be created',
          });
          throw new AppError('service_unavailable', 'the sandbox backend could not create a sandbox');
        }
        await sink.stage({
          stage: 'provision',
          state: 'done',
          durationMs: Math.round(performance.now() - t0),
        });
        try {
          await deps.coldPath({ sink, sandboxName: name, environment, env: { ...row.env_vars, ...secrets } });
        } catch (err) {
          flush();
          throw new AppError(
            'validation_failed',
            `the environment could not be provisioned: ${registry.redact((err as Error).message).toString('utf8')}`,
            {
              extra: { errors: { environment: [registry.redact((err as Error).message).toString('utf8')] } },
            },
          );
        }
        const t1 = performance.now();
        onEvent({ type: 'stage', stage: 'checkpoint', state: 'started' });
        try {
          const cleared = await sandbox.exec(name, {
            cmd: ['rm', '-rf', '/home/sandbox/.paddock'],
            timeoutMs: 30_000,
          });
          if (cleared.exitCode !== 0) throw new Error(`cleanup exited ${cleared.exitCode}`);
          checkpointId = (await sandbox.createCheckpoint(name, { comment: `environment ${id}` })).id;
        } catch (err) {
          logger.warn({ err }, 'checkpoint build: checkpoint failed');
          onEvent({
            type: 'stage',
            stage: 'checkpoint',
            state: 'failed',
            duration_ms: Math.round(performance.now() - t1),
            message: 'the sandbox backend could not create the checkpoint',
          });
          throw new AppError('service_unavailable', 'the sandbox backend could not create the checkpoint');
        }
        onEvent({
          type: 'stage',
          stage: 'checkpoint',
          state: 'done',
          duration_ms: Math.round(performance.now() - t1),
        });
      } finally {
        await deps.destroys.destroy(ctx.tenantId, name);
      }
      const stored = await db
        .updateTable('environments')
        .set({ checkpoint_id: checkpointId })
        .where('tenant_id', '=', ctx.tenantId)
        .where('id', '=', id)
        .where(buildInputsUnchanged(row))
        .executeTakeFirst();
      if (Number(stored.numUpdatedRows) === 0) {
        throw new AppError(
          'conflict',
          'the environment was changed or deleted while its checkpoint was built: build it again',
        );
      }
      const view = await deps.environments.get(ctx, id);
      onEvent({ type: 'done', environment: view });
      return view;
    },
  };
}

/** The build's inputs are still the environment's (jsonb compares by value). */
export function buildInputsUnchanged(row: Pick<EnvironmentRow, 'packages' | 'repos' | 'setup_script'>) {
  return sql<boolean>`packages = ${JSON.stringify(row.packages)}::jsonb AND repos = ${JSON.stringify(row.repos)}::jsonb AND setup_script IS NOT DISTINCT FROM ${row.setup_script}`;
}
