import type { FastifyPluginAsync } from 'fastify';
import type { Config } from '../../config/config.ts';
import { withOwnServer } from '../api-docs.ts';
import { ownOriginResolver } from '../own-origin.ts';

/**
 * GET /api/openapi.json: the OpenAPI 3.1 document generated from the route schemas, its
 * server being the origin the request reached (own-origin.ts). Public.
 */
export function openapiRoutes(deps: { config: Config }): FastifyPluginAsync {
  const ownOrigin = ownOriginResolver(deps.config);
  return async (app) => {
    app.get('/api/openapi.json', { schema: { hide: true }, config: { schemaless: true } }, async (request) =>
      withOwnServer(app.swagger(), ownOrigin(request)),
    );
  };
}
