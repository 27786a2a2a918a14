// Authentication for /api routes. Routes opt in with `onRequest: [app.requireAuth]`.
// It runs as an onRequest hook, after the global rate limiter (so failed auth is metered)
// and before the body is parsed or validated (so an anonymous caller learns nothing
// about a route's schema).
import type { FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Db } from '../db/database.ts';
import { AppError } from '../http/errors.ts';
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
}

export interface AuthPluginDeps {
  db: Db;
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
    app.decorateRequest('principal', null);

    const resolve = async (request: FastifyRequest): Promise<Principal | null> => {
      const token = bearerToken(request);
      if (token) return await principalFromApiKey(deps.db, token);
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
