// /api/environments and its secrets sub-resource. Thin: schema → service → reply.
import type { FastifyPluginAsync } from 'fastify';
import { registerNamedResourceRoutes } from '../resources/named-resource.routes.ts';
import { ErrorResponse } from '../resources/responses.ts';
import { registerSecretRoutes } from '../secrets/secrets.routes.ts';
import { registerEnvironmentCheckpointRoute } from './environment-checkpoint.routes.ts';
import type { EnvironmentCheckpoints } from './environment-checkpoint.ts';
import { EnvironmentBody, EnvironmentView } from './environments.schema.ts';
import type { EnvironmentsService } from './environments.service.ts';

const TAG = 'Environments';

export function environmentsRoutes(deps: {
  environments: EnvironmentsService;
  environmentCheckpoints: EnvironmentCheckpoints;
}): FastifyPluginAsync {
  const service = deps.environments;
  return async (app) => {
    registerNamedResourceRoutes(app, {
      path: '/api/environments',
      tag: TAG,
      body: EnvironmentBody,
      // Room for every field near its cap at once except env_vars, whose 200 × 32 KiB cap
      // is for a few large values, not all of them (docs/api.md).
      bodyLimit: 1024 * 1024,
      view: EnvironmentView,
      list: { summary: 'List environments (unpaginated, by name)', load: (ctx) => service.list(ctx) },
      summaries: {
        create: 'Create an environment',
        get: 'Get an environment',
        update: 'Replace every mutable field of an environment',
        remove: 'Delete an environment and its secrets (409 while agents use it)',
      },
      removeErrors: { 409: ErrorResponse },
      service,
    });
    registerSecretRoutes(app, { prefix: '/api/environments', tag: TAG, owned: service.secrets });
    registerEnvironmentCheckpointRoute(app, {
      environments: service,
      checkpoints: deps.environmentCheckpoints,
    });
  };
}
