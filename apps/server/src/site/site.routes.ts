// Public pages of the site: what the console's home page shows a signed-out visitor
// (GET /api/site), the legal pages (only when the four LEGAL_* variables are set), and the
// machine-oriented API summaries generated from the OpenAPI document (/llms.txt,
// /llms-full.txt, /skill). All public, no credentials.
import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../config/config.ts';
import { ownOriginResolver } from '../http/own-origin.ts';
import { llmsFullTxt, llmsTxt, type OpenApiDoc, skillMd } from './api-summary.ts';
import { privacyPage, termsPage } from './legal.ts';

export const SiteView = z.object({
  billing: z.object({
    enabled: z.boolean(),
    price_monthly_cents: z.number().int().nullable().describe('BILLING_PRICE_MONTHLY_CENTS; null when unset'),
  }),
  legal: z.boolean().describe('whether /terms and /privacy exist (the four LEGAL_* variables are set)'),
  registration_enabled: z.boolean(),
});

export function siteRoutes(deps: { config: Config }): FastifyPluginAsync {
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();
    const { config } = deps;
    const ownOrigin = ownOriginResolver(config);

    app.get(
      '/api/site',
      {
        schema: {
          tags: ['site'],
          summary: "What the console's public pages show: price (billing on), legal pages, registration",
          response: { 200: SiteView },
        },
      },
      async () => ({
        billing: {
          enabled: config.billing.enabled,
          price_monthly_cents: config.billing.enabled ? config.billing.priceMonthlyCents : null,
        },
        legal: config.legal !== null,
        registration_enabled: config.registration.enabled,
      }),
    );

    // Built on first request per origin: the document is complete only after every route
    // registered. The origins are the few ownOrigin can answer (own-origin.ts), so the map
    // stays small whatever Host headers arrive.
    const summaries = new Map<string, { llms: string; full: string; skill: string }>();
    const summary = (server: FastifyInstance, request: FastifyRequest) => {
      const base = ownOrigin(request);
      let built = summaries.get(base);
      if (!built) {
        const doc = server.swagger() as unknown as OpenApiDoc;
        built = { llms: llmsTxt(doc, base), full: llmsFullTxt(doc, base), skill: skillMd(doc, base) };
        summaries.set(base, built);
      }
      return built;
    };
    const text = { schema: { hide: true }, config: { schemaless: true } };
    app.get('/llms.txt', text, async (request, reply) =>
      reply
        .type('text/plain; charset=utf-8')
        .header('cache-control', 'public, max-age=300')
        .header('vary', 'host')
        .send(summary(root, request).llms),
    );
    app.get('/llms-full.txt', text, async (request, reply) =>
      reply
        .type('text/plain; charset=utf-8')
        .header('cache-control', 'public, max-age=300')
        .header('vary', 'host')
        .send(summary(root, request).full),
    );
    app.get('/skill', text, async (request, reply) =>
      reply
        .type('text/markdown; charset=utf-8')
        .header('cache-control', 'public, max-age=300')
        .header('vary', 'host')
        .header('content-disposition', 'inline; filename="SKILL.md"')
        .send(summary(root, request).skill),
    );

    const legal = config.legal;
    if (legal) {
      const terms = termsPage(legal);
      const privacy = privacyPage(legal);
      app.get('/terms', text, async (_request, reply) => reply.type('text/html; charset=utf-8').send(terms));
      app.get('/privacy', text, async (_request, reply) =>
        reply.type('text/html; charset=utf-8').send(privacy),
      );
    }
  };
}
