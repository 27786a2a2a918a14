// The interactive API docs at /api/docs (Swagger UI, from @fastify/swagger-ui) as Paddock's
// page. What must hold (apps/server/test/api-docs.browser.test.ts):
// - It runs under the app's own Content-Security-Policy (plugins/security.ts): every script
//   is a file (the initializer too), nothing asks for a policy of its own.
// - The server it offers for "Try it out" is the origin the page was served from
//   (own-origin.ts), so requests are same-origin and carry the session cookie.
// - It carries Paddock's name and mark: the title, the favicon, no Swagger topbar or logo.
import { readFileSync } from 'node:fs';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance, FastifyRequest } from 'fastify';

/** The console's own mark, one source for both pages. */
const FAVICON = readFileSync(new URL('../../../web/public/favicon.svg', import.meta.url));

/** An OpenAPI document whose server list is the origin this request reached. */
export function withOwnServer<T extends object>(doc: T, origin: string): T & { servers: { url: string }[] } {
  return { ...doc, servers: [{ url: origin }] };
}

export async function registerApiDocs(
  app: FastifyInstance,
  ownOrigin: (request: FastifyRequest) => string,
): Promise<void> {
  await app.register(swaggerUi, {
    routePrefix: '/api/docs',
    theme: {
      title: 'Paddock API',
      favicon: [
        { filename: 'favicon.svg', rel: 'icon', sizes: 'any', type: 'image/svg+xml', content: FAVICON },
      ],
    },
    // BaseLayout: the document without the standalone topbar (Swagger's logo and URL box).
    uiConfig: { deepLinking: true, layout: 'BaseLayout' },
    transformSpecification: (spec, request) => withOwnServer(spec, ownOrigin(request)),
  });
}
