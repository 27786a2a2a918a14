import type { FastifyPluginAsync } from 'fastify';

/** GET /api/openapi.json: the OpenAPI 3.1 document generated from the route schemas. Public. */
export const openapiRoutes: FastifyPluginAsync = async (app) => {
  app.get('/api/openapi.json', { schema: { hide: true }, config: { schemaless: true } }, async () =>
    app.swagger(),
  );
};
