// Browser sessions. Invariants (sessions.http.test.ts):
// - A session token is 256 random bits, handed out once in the `paddock_session` cookie
//   (HttpOnly, SameSite=Lax, Path=/, Secure when PUBLIC_URL is https) and stored only as
//   its SHA-256. Every login issues a fresh token and ends the session the browser
//   presented (no session fixation).
// - A session dies after SESSION_IDLE_TIMEOUT_MS without use or SESSION_ABSOLUTE_TIMEOUT_MS
//   after login, whichever comes first; logout deletes it server-side, so a copied cookie
//   stops working at once.
// - Cookie-authenticated unsafe requests pass the CSRF origin check (csrf.ts).
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config/config.ts';
import type { Db } from '../db/database.ts';
import { allowedOrigins, assertSameOrigin } from './csrf.ts';
import type { Principal } from './principal.ts';
import {
  deleteSessionByToken,
  deleteUserSessions,
  findLiveSession,
  insertSession,
  touchSession,
} from './sessions.repo.ts';
import { generateSecret } from './tokens.ts';

export const SESSION_COOKIE = 'paddock_session';
export const SESSION_IDLE_TIMEOUT_MS = 24 * 60 * 60 * 1000;
export const SESSION_ABSOLUTE_TIMEOUT_MS = 14 * 24 * 60 * 60 * 1000;
/** last_seen_at is written at most this often per session. */
const TOUCH_INTERVAL_MS = 60 * 1000;

export interface SessionsService {
  /** Starts a session, ending the one `request` presented, and sets the cookie on `reply`. */
  start(request: FastifyRequest, reply: FastifyReply, userId: string, db?: Db): Promise<string>;
  /** Ends the presented session (server-side) and clears the cookie. */
  end(request: FastifyRequest, reply: FastifyReply): Promise<void>;
  /** Ends all sessions of a user except `keepSessionId`. */
  endAllForUser(userId: string, keepSessionId?: string | null, db?: Db): Promise<number>;
  /** The authResolvers entry: a principal for a valid session cookie, enforcing CSRF. */
  resolve(request: FastifyRequest): Promise<Principal | null>;
}

export function sessionCookieOf(request: FastifyRequest): string | null {
  const value = request.cookies?.[SESSION_COOKIE];
  return typeof value === 'string' && value !== '' ? value : null;
}

export function createSessionsService(deps: { db: Db; config: Config }): SessionsService {
  const origins = allowedOrigins(deps.config);
  const cookieOptions = {
    httpOnly: true,
    sameSite: 'lax' as const,
    secure: deps.config.httpsOnly,
    path: '/',
  };

  return {
    async start(request, reply, userId, db = deps.db) {
      const previous = sessionCookieOf(request);
      if (previous) await deleteSessionByToken(db, previous);
      const token = generateSecret();
      const sessionId = await insertSession(db, userId, {
        token,
        expiresAt: new Date(Date.now() + SESSION_ABSOLUTE_TIMEOUT_MS),
        ip: request.ip,
        userAgent: request.headers['user-agent']?.slice(0, 300) ?? null,
      });
      reply.setCookie(SESSION_COOKIE, token, {
        ...cookieOptions,
        maxAge: Math.floor(SESSION_ABSOLUTE_TIMEOUT_MS / 1000),
      });
      return sessionId;
    },

    async end(request, reply) {
      const token = sessionCookieOf(request);
      if (token) await deleteSessionByToken(deps.db, token);
      reply.clearCookie(SESSION_COOKIE, cookieOptions);
    },

    async endAllForUser(userId, keepSessionId, db = deps.db) {
      return await deleteUserSessions(db, userId, keepSessionId);
    },

    async resolve(request) {
      const token = sessionCookieOf(request);
      if (!token) return null;
      const row = await findLiveSession(deps.db, token, SESSION_IDLE_TIMEOUT_MS);
      if (!row) return null;
      assertSameOrigin(request, origins);
      if (Date.now() - row.last_seen_at.getTime() > TOUCH_INTERVAL_MS)
        await touchSession(deps.db, row.session_id);
      return {
        userId: row.user_id,
        tenantId: row.user_id,
        email: row.email,
        isAdmin: row.is_admin,
        via: 'session',
        apiKeyId: null,
        sessionId: row.session_id,
        scope: 'full',
        conversationId: null,
      };
    },
  };
}
