// Every route module of the service, registered in one place.
import type { FastifyInstance } from 'fastify';
import { agentsRoutes } from '../agents/agents.routes.ts';
import type { Deps } from '../deps.ts';
import { environmentsRoutes } from '../environments/environments.routes.ts';
import { vaultsRoutes } from '../vaults/vaults.routes.ts';
import { healthRoutes } from './routes/health.routes.ts';
import { openapiRoutes } from './routes/openapi.routes.ts';

export async function registerRoutes(app: FastifyInstance, deps: Deps): Promise<void> {
  await app.register(healthRoutes(deps));
  await app.register(openapiRoutes);
  await app.register(environmentsRoutes(deps));
  await app.register(vaultsRoutes(deps));
  await app.register(agentsRoutes(deps));
}
