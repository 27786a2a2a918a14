// Browser routes of GitHub sign-in. Invariants (oauth.http.test.ts):
// - Registered only when GITHUB_CLIENT_ID is set (the console hides the button otherwise).
// - The state parameter is 256 random bits, bound to the browser by an HttpOnly,
//   SameSite=Lax cookie scoped to /auth/oauth and valid for 10 minutes; the callback
//   refuses any state that does not equal the cookie (login CSRF), and the cookie is
//   cleared after one use.
// - Only a provider-verified email links to or creates an account (accounts.service.ts).
import { timingSafeEqual } from 'node:crypto';
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Deps } from '../deps.ts';
import { AppError } from '../http/errors.ts';
import { authRateLimit } from '../http/plugins/auth-rate-limit.ts';
import { fetchGithubIdentity, githubAuthorizeUrl } from './oauth.github.ts';
import { generateSecret, hashSecret } from './tokens.ts';

export const OAUTH_STATE_COOKIE = 'paddock_oauth_state';

export function oauthRoutes(
  deps: Pick<Deps, 'config' | 'accounts' | 'sessions' | 'audit' | 'logger'>,
): FastifyPluginAsync {
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();
    const { config } = deps;
    if (!config.oauth.github) return;
    const stateCookie = {
      httpOnly: true,
      sameSite: 'lax' as const,
      secure: config.httpsOnly,
      path: '/auth/oauth',
    };
    // Per-IP budget on top of the global limit (http/plugins/auth-rate-limit.ts).
    const limited = () => [authRateLimit(root, config)];

    app.get(
      '/auth/oauth/github',
      { onRequest: limited(), schema: { hide: true } },
      async (_request, reply) => {
        const state = generateSecret();
        reply.setCookie(OAUTH_STATE_COOKIE, state, { ...stateCookie, maxAge: 600 });
        return reply.redirect(githubAuthorizeUrl(config, state), 302);
      },
    );

    app.get(
      '/auth/oauth/github/callback',
      {
        onRequest: limited(),
        schema: {
          hide: true,
          querystring: z.object({
            code: z.string().max(512).optional(),
            state: z.string().max(512).optional(),
            error: z.string().max(200).optional(),
          }),
        },
      },
      async (request, reply) => {
        const expected = request.cookies[OAUTH_STATE_COOKIE];
        reply.clearCookie(OAUTH_STATE_COOKIE, stateCookie);
        const { code, state } = request.query;
        const stateOk =
          typeof expected === 'string' &&
          typeof state === 'string' &&
          timingSafeEqual(hashSecret(expected), hashSecret(state));
        if (!stateOk || !code) return reply.redirect('/?flash=oauth_failed', 303);
        try {
          const identity = await fetchGithubIdentity(config, code);
          const user = await deps.accounts.signInWithOAuth(
            { provider: 'github', ...identity },
            { ip: request.ip },
          );
          const sessionId = await deps.sessions.start(request, reply, user.id);
          await deps.audit.record({
            type: 'auth.login.succeeded',
            tenantId: user.id,
            actor: { kind: 'user', userId: user.id },
            ip: request.ip,
            metadata: { method: 'oauth_github', session_id: sessionId },
          });
          return reply.redirect('/', 303);
        } catch (err) {
          const flash = err instanceof AppError ? err.code : 'oauth_failed';
          if (!(err instanceof AppError)) {
            request.log.warn(
              { reason: err instanceof Error ? err.message : String(err) },
              'GitHub sign-in failed',
            );
          }
          return reply.redirect(`/?flash=${encodeURIComponent(flash)}`, 303);
        }
      },
    );
  };
}
