// Authentication for /api routes. Routes opt in with `onRequest: [app.requireAuth]`.
// It runs as an onRequest hook, after the global rate limiter (so failed auth is metered)
// and before the body is parsed or validated (so an anonymous caller learns nothing
// about a route's schema).
//
// Conversation-scoped keys (the sandbox callback token) are refused with 403 by
// requireAuth unless the route opts in with `config: { allowConversationScope: true }`:
// a leaked callback token can reach only the routes built for it (auth.plugin.test.ts).
import cookie from '@fastify/cookie';
import type { FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Config } from '../config/config.ts';
import type { Db } from '../db/database.ts';
import { AppError } from '../http/errors.ts';
import { allowedOrigins, assertNotCrossSite } from './csrf.ts';
import type { PrincipalCache } from './principal.ts';
import { type Principal, principalFromApiKey } from './principal.ts';

declare module 'fastify' {
  interface FastifyRequest {
    principal: Principal | null;
  }
  interface FastifyInstance {
    /** onRequest hook: 401 unless a valid credential is presented; sets request.principal. */
    requireAuth: (request: FastifyRequest, reply: FastifyReply) => Promise<void>;
    /** onRequest hook: like requireAuth, then 403 unless the caller is an admin. */
    requireAdmin: (request: FastifyRequest, reply: FastifyReply) => Promise<void>;
  }
  interface FastifyContextConfig {
    /** Lets conversation-scoped keys (sandbox callback tokens) call this route. */
    allowConversationScope?: boolean;
  }
}

export interface AuthPluginDeps {
  db: Db;
  config: Config;
  /** Short-lived cache of resolved API keys (principal-cache.ts). */
  principals?: PrincipalCache;
  /** Additional credential resolvers (session cookies), tried after the bearer key. */
  resolvers?: ReadonlyArray<(request: FastifyRequest) => Promise<Principal | null>>;
}

export function bearerToken(request: FastifyRequest): string | null {
  const header = request.headers.authorization;
  if (!header) return null;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1] ?? null;
}

/** The principal of an authenticated request; throws 401 when a route forgot requireAuth. */
export function principalOf(request: FastifyRequest): Principal {
  if (!request.principal) throw new AppError('unauthorized', 'authentication required');
  return request.principal;
}

export const authPlugin = fp<AuthPluginDeps>(
  async (app, deps) => {
    await app.register(cookie);
    app.decorateRequest('principal', null);

    // Login CSRF: an unsafe request from a foreign page is refused even before it
    // authenticates. Bearer requests are exempt (browsers never add that header themselves).
    const origins = allowedOrigins(deps.config);
    app.addHook('onRequest', async (request) => {
      if (bearerToken(request)) return;
      assertNotCrossSite(request, origins);
    });

    const resolve = async (request: FastifyRequest): Promise<Principal | null> => {
      const token = bearerToken(request);
      if (token) return await principalFromApiKey(deps.db, token, deps.principals);
      for (const resolver of deps.resolvers ?? []) {
        const p = await resolver(request);
        if (p) return p;
      }
      return null;
    };

    const requireAuth = async (request: FastifyRequest, _reply: FastifyReply): Promise<void> => {
      const principal = await resolve(request);
      if (!principal) {
        throw new AppError('unauthorized', 'missing or invalid credentials', {
          headers: { 'www-authenticate': 'Bearer' },
        });
      }
      if (principal.scope !== 'full' && request.routeOptions.config.allowConversationScope !== true) {
        throw new AppError(
          'forbidden',
          'this API key is scoped to a conversation and cannot call this route',
        );
      }
      request.principal = principal;
    };
    app.decorate('requireAuth', requireAuth);
    app.decorate('requireAdmin', async (request: FastifyRequest, reply: FastifyReply) => {
      await requireAuth(request, reply);
      if (!request.principal?.isAdmin) throw new AppError('forbidden', 'admin role required');
    });
  },
  { name: 'paddock-auth' },
);
