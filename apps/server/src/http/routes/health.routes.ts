import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Deps } from '../../deps.ts';

const ReadyBody = z.object({
  checks: z.object({ database: z.enum(['ok', 'error']) }),
  status: z.enum(['ok', 'error']),
});

export function healthRoutes(deps: Pick<Deps, 'health'>): FastifyPluginAsync {
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();
    app.get(
      '/health',
      {
        schema: {
          hide: true,
          response: { 200: z.object({ status: z.literal('ok') }) },
        },
      },
      async () => ({ status: 'ok' as const }),
    );
    app.get(
      '/health/ready',
      {
        schema: { hide: true, response: { 200: ReadyBody, 503: ReadyBody } },
      },
      async (_request, reply) => {
        const database = (await deps.health.databaseOk()) ? 'ok' : 'error';
        const status = database === 'ok' ? 'ok' : 'error';
        if (status !== 'ok') reply.code(503).header('retry-after', '5');
        return { checks: { database }, status } as const;
      },
    );
  };
}
