// Every route module of the service, registered in one place.
import type { FastifyInstance } from 'fastify';
import type { Deps } from '../deps.ts';
import { healthRoutes } from './routes/health.routes.ts';
import { openapiRoutes } from './routes/openapi.routes.ts';

export async function registerRoutes(app: FastifyInstance, deps: Deps): Promise<void> {
  await app.register(healthRoutes(deps));
  await app.register(openapiRoutes);
}
