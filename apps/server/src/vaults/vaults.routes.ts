// /api/vaults and its secrets sub-resource. Thin: schema → service → reply.
import type { FastifyPluginAsync } from 'fastify';
import { registerNamedResourceRoutes } from '../resources/named-resource.routes.ts';
import { registerSecretRoutes } from '../secrets/secrets.routes.ts';
import { VaultBody, VaultView } from './vaults.schema.ts';
import type { VaultsService } from './vaults.service.ts';

const TAG = 'Vaults';

export function vaultsRoutes(deps: { vaults: VaultsService }): FastifyPluginAsync {
  const service = deps.vaults;
  return async (app) => {
    registerNamedResourceRoutes(app, {
      path: '/api/vaults',
      tag: TAG,
      body: VaultBody,
      // A name and 16 KiB of metadata.
      bodyLimit: 64 * 1024,
      view: VaultView,
      list: { summary: 'List vaults (unpaginated, by name)', load: (ctx) => service.list(ctx) },
      summaries: {
        create: 'Create a vault',
        get: 'Get a vault',
        update: 'Replace every mutable field of a vault',
        remove: 'Delete a vault, its secrets and its place on agent allowlists',
      },
      service,
    });
    registerSecretRoutes(app, { prefix: '/api/vaults', tag: TAG, owned: service.secrets });
  };
}
