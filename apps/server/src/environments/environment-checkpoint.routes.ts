// POST /api/environments/:id/checkpoint. Progress: with `Accept: application/x-ndjson` the
// answer is 200 and one JSON object per line as the build runs (stage events, redacted output,
// then `done` with the environment or `error`); otherwise the request waits and answers 201 with
// the environment (checkpoint_id set). docs/environments.md "How a conversation's sandbox is
// provisioned".
import { PassThrough } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { z } from 'zod';
import { AppError } from '../http/errors.ts';
import { contextOf } from '../resources/context.ts';
import { IdParams } from '../resources/fields.ts';
import { ErrorResponse, ValidationErrorResponse } from '../resources/responses.ts';
import type { CheckpointEvent, EnvironmentCheckpoints } from './environment-checkpoint.ts';
import { EnvironmentView } from './environments.schema.ts';
import type { EnvironmentsService } from './environments.service.ts';

export function registerEnvironmentCheckpointRoute(
  app: FastifyInstance,
  deps: { environments: Pick<EnvironmentsService, 'get'>; checkpoints: EnvironmentCheckpoints },
): void {
  app.post<{ Params: z.output<typeof IdParams> }>(
    '/api/environments/:id/checkpoint',
    {
      onRequest: [app.requireAuth],
      schema: {
        tags: ['Environments'],
        summary: 'Build an environment checkpoint (cold path in a fresh sandbox) for warm starts',
        description:
          'Runs packages, network, clone and setup in a new sandbox, checkpoints it, stores checkpoint_id and destroys the sandbox. With `Accept: application/x-ndjson`: 200 and one JSON object per line (`{type:"stage",stage,state,duration_ms?,message?}`, `{type:"stdout"|"stderr",text}`, then `{type:"done",environment}` or `{type:"error",error,message}`). Otherwise waits and answers 201.',
        security: [{ bearer: [] }],
        params: IdParams,
        response: {
          201: EnvironmentView,
          404: ErrorResponse,
          409: ErrorResponse,
          422: ValidationErrorResponse,
          503: ErrorResponse,
        },
      },
    },
    async (request, reply) => {
      const ctx = contextOf(request);
      const id = request.params.id;
      if (!/\bapplication\/x-ndjson\b/.test(request.headers.accept ?? '')) {
        const view = await deps.checkpoints.build(ctx, id);
        return reply.code(201).send(view);
      }
      // Existence first, so an unknown id is a plain 404 rather than a stream.
      await deps.environments.get(ctx, id);
      const stream = new PassThrough();
      const write = (event: CheckpointEvent) => {
        if (!stream.writableEnded) stream.write(`${JSON.stringify(event)}\n`);
      };
      deps.checkpoints
        .build(ctx, id, write)
        .catch((err: unknown) => {
          if (err instanceof AppError) write({ type: 'error', error: err.code, message: err.message });
          else {
            request.log.error({ err }, 'environment checkpoint build failed');
            write({ type: 'error', error: 'internal_error', message: 'the checkpoint could not be built' });
          }
        })
        .finally(() => stream.end());
      return reply
        .code(200)
        .type('application/x-ndjson; charset=utf-8')
        .header('cache-control', 'no-store')
        .send(stream);
    },
  );
}
