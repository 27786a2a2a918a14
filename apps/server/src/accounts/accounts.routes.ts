// /api/auth/*: registration, verification, login/logout, password and email changes, the
// password-to-key exchange and identity. Thin: schema → service → reply.
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { auditActorFrom } from '../audit/audit.service.ts';
import { principalOf } from '../auth/auth.plugin.ts';
import type { Config } from '../config/config.ts';
import type { Deps } from '../deps.ts';
import { authRateLimit } from '../http/plugins/auth-rate-limit.ts';
import { printsMail } from '../mail/mailer.ts';
import {
  CreatedApiKey,
  Email,
  ExpiresInDays,
  KeyName,
  Message,
  MeView,
  PasswordInput,
  RevokeApiKeys,
  TokenInput,
  UserView,
} from './accounts.schemas.ts';
import { toUserView } from './accounts.service.ts';

export const RESEND_RESPONSE =
  'If an unverified account exists for that address, a new verification link is on its way.';
export const RESET_RESPONSE = 'If an account exists for that address, a password reset link is on its way.';

/**
 * The answer to "Forgot password", true to how this instance makes mail; the same for any
 * address. Development without mail prints the mail to the server's terminal; an instance
 * without mail elsewhere sends nothing, and an administrator is the way back in.
 */
export function resetResponse(config: Config): string {
  if (config.mail.transport.kind !== 'none') return RESET_RESPONSE;
  if (printsMail(config)) {
    return `${RESET_RESPONSE} No mail is configured (development): it is printed in the terminal running Paddock (npm start).`;
  }
  return 'If an account exists for that address, no link can reach it: this instance sends no mail. Ask an administrator to set a temporary password for you.';
}

type AccountsRouteDeps = Pick<Deps, 'accounts' | 'sessions' | 'audit' | 'config' | 'billing'>;

export function accountsRoutes(deps: AccountsRouteDeps): FastifyPluginAsync {
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();
    const { accounts, sessions, audit, config } = deps;
    // Per-IP limits on endpoints that check credentials or send mail, on top of the global
    // one (each route its own bucket, which its implicit HEAD shares).
    const limited = () => [authRateLimit(root, config)];
    const tags = ['auth'];
    // Account bodies refuse unknown fields with 422 naming them, as resource bodies do: a
    // misspelled `revoke_api_keys` must not silently succeed as a plain password change.
    const Body = z.strictObject;

    app.post(
      '/api/auth/register',
      {
        onRequest: limited(),
        schema: {
          tags,
          summary: 'Create an account with email and password',
          body: Body({ email: Email, password: PasswordInput }),
          response: { 201: z.object({ user: UserView, can_sign_in_now: z.boolean(), message: z.string() }) },
        },
      },
      async (request, reply) => {
        const { user, canSignInNow } = await accounts.register(request.body, { ip: request.ip });
        reply.code(201);
        return {
          user,
          can_sign_in_now: canSignInNow,
          message: canSignInNow
            ? 'Account created. You can sign in now.'
            : 'Account created. Check your inbox for a link to confirm your email address, then sign in.',
        };
      },
    );

    app.post(
      '/api/auth/verify',
      {
        onRequest: limited(),
        schema: {
          tags,
          summary: 'Confirm an email address with the token from the verification email',
          body: Body({ token: TokenInput }),
          response: { 200: z.object({ user: UserView, message: z.string() }) },
        },
      },
      async (request) => {
        const user = await accounts.verifyEmail(request.body.token, { ip: request.ip });
        return { user, message: 'Email address confirmed. You can sign in now.' };
      },
    );

    // The link in the verification email: confirms, then sends the browser to the console.
    app.get(
      '/auth/verify',
      {
        onRequest: limited(),
        schema: { hide: true, querystring: z.object({ token: z.string().max(512).optional() }) },
      },
      async (request, reply) => {
        const { token } = request.query;
        // Mail scanners probe links with HEAD: it never performs the action.
        if (request.method === 'HEAD') return reply.code(200).send();
        try {
          if (!token) throw new Error('missing token');
          await accounts.verifyEmail(token, { ip: request.ip });
          return reply.redirect('/?flash=email_verified', 303);
        } catch {
          // A second click (or a scanner's GET before the person's own) is not an error.
          if (token && (await accounts.linkAlreadyUsed('verify_email', token))) {
            return reply.redirect('/?flash=email_already_verified', 303);
          }
          return reply.redirect('/?flash=verification_link_invalid', 303);
        }
      },
    );

    app.post(
      '/api/auth/resend-verification',
      {
        onRequest: limited(),
        schema: {
          tags,
          summary: 'Send a new verification link (same answer whether or not the address exists)',
          body: Body({ email: Email }),
          response: { 202: Message },
        },
      },
      async (request, reply) => {
        await accounts.resendVerification(request.body.email);
        reply.code(202);
        return { message: RESEND_RESPONSE };
      },
    );

    app.post(
      '/api/auth/login',
      {
        onRequest: limited(),
        schema: {
          tags,
          summary: 'Sign in with email and password; sets the paddock_session cookie',
          body: Body({ email: z.string().max(254), password: PasswordInput }),
          response: { 200: z.object({ user: UserView }) },
        },
      },
      async (request, reply) => {
        const user = await accounts.authenticate(request.body, { ip: request.ip });
        const sessionId = await sessions.start(request, reply, user.id);
        await audit.record({
          type: 'auth.login.succeeded',
          tenantId: user.id,
          actor: { kind: 'user', userId: user.id },
          ip: request.ip,
          metadata: { method: 'password', session_id: sessionId },
        });
        return { user: toUserView(user) };
      },
    );

    app.post(
      '/api/auth/logout',
      {
        schema: {
          tags,
          summary: 'End the browser session (server-side) and clear its cookie',
          response: { 200: Message },
        },
      },
      async (request, reply) => {
        const principal = await sessions.resolve(request);
        await sessions.end(request, reply);
        if (principal) {
          await audit.record({
            type: 'auth.logout',
            tenantId: principal.userId,
            actor: { kind: 'user', userId: principal.userId },
            ip: request.ip,
          });
        }
        return { message: 'Signed out.' };
      },
    );

    app.post(
      '/api/auth/token',
      {
        onRequest: limited(),
        schema: {
          tags,
          summary: 'Exchange email and password for a new API key (shown once)',
          body: Body({
            email: z.string().max(254),
            password: PasswordInput,
            name: KeyName.default('CLI'),
            expires_in_days: ExpiresInDays,
          }),
          response: { 201: CreatedApiKey },
        },
      },
      async (request, reply) => {
        const { email, password, name, expires_in_days } = request.body;
        const key = await accounts.mintKeyWithPassword(
          { email, password, name, expiresInDays: expires_in_days ?? null },
          { ip: request.ip },
        );
        reply.code(201);
        return key;
      },
    );

    app.get(
      '/api/auth/me',
      {
        onRequest: [app.requireAuth],
        // A sandbox's callback key may ask who it acts for (docs/environments.md).
        config: { allowConversationScope: true },
        schema: { tags, summary: 'The authenticated account', response: { 200: MeView } },
      },
      async (request) => {
        const principal = principalOf(request);
        const me = await accounts.me(principal);
        return {
          ...me,
          // Billing off (BILLING_ENABLED=false): no subscription or trial state, status null.
          ...(deps.billing ? await deps.billing.me(principal.tenantId) : { subscription_status: null }),
          auth: { via: principal.via, scope: principal.scope },
        };
      },
    );

    app.post(
      '/api/auth/password',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags,
          summary:
            'Change the password; ends every other session and voids pending reset and email-change links',
          body: Body({
            current_password: PasswordInput,
            new_password: PasswordInput,
            revoke_api_keys: RevokeApiKeys,
          }),
          response: {
            200: z.object({
              message: z.string(),
              sessions_ended: z.number().int(),
              api_keys_revoked: z.number().int(),
            }),
          },
        },
      },
      async (request) => {
        const { sessionsEnded, apiKeysRevoked } = await accounts.changePassword(
          principalOf(request),
          {
            currentPassword: request.body.current_password,
            newPassword: request.body.new_password,
            revokeApiKeys: request.body.revoke_api_keys ?? false,
          },
          { ip: request.ip },
        );
        return {
          message: 'Password changed. Other sessions were signed out.',
          sessions_ended: sessionsEnded,
          api_keys_revoked: apiKeysRevoked,
        };
      },
    );

    app.post(
      '/api/auth/sessions/end-others',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags,
          summary: "Sign out every other browser session of the account (the caller's own stays)",
          response: { 200: z.object({ sessions_ended: z.number().int() }) },
        },
      },
      async (request) => {
        const principal = principalOf(request);
        const ended = await sessions.endAllForUser(principal.userId, principal.sessionId);
        await audit.record({
          type: 'auth.sessions.ended',
          tenantId: principal.userId,
          actor: auditActorFrom(principal),
          ip: request.ip,
          metadata: { count: ended, kept_current: principal.sessionId !== null },
        });
        return { sessions_ended: ended };
      },
    );

    app.post(
      '/api/auth/password-reset',
      {
        onRequest: limited(),
        schema: {
          tags,
          summary: 'Send a password reset link (same answer whether or not the address exists)',
          body: Body({ email: Email }),
          response: { 202: Message },
        },
      },
      async (request, reply) => {
        await accounts.requestPasswordReset(request.body.email, { ip: request.ip });
        reply.code(202);
        return { message: resetResponse(config) };
      },
    );

    app.post(
      '/api/auth/password-reset/confirm',
      {
        onRequest: limited(),
        schema: {
          tags,
          summary:
            'Set a new password with a reset token (single use, one hour); ends all sessions and voids pending email-change links',
          body: Body({ token: TokenInput, password: PasswordInput, revoke_api_keys: RevokeApiKeys }),
          response: { 200: z.object({ message: z.string(), api_keys_revoked: z.number().int() }) },
        },
      },
      async (request) => {
        const { apiKeysRevoked } = await accounts.confirmPasswordReset(
          {
            token: request.body.token,
            password: request.body.password,
            revokeApiKeys: request.body.revoke_api_keys ?? false,
          },
          { ip: request.ip },
        );
        return {
          message: 'Password changed. Sign in with your new password.',
          api_keys_revoked: apiKeysRevoked,
        };
      },
    );

    app.post(
      '/api/auth/email',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags,
          summary:
            'Change the sign-in email; sends a confirmation link to the new address (the same 202 whether or not it is registered)',
          body: Body({ current_password: PasswordInput, new_email: Email }),
          response: {
            202: z.object({ status: z.enum(['confirmation_sent', 'changed']), message: z.string() }),
          },
        },
      },
      async (request, reply) => {
        const { status } = await accounts.requestEmailChange(
          principalOf(request),
          { currentPassword: request.body.current_password, newEmail: request.body.new_email },
          { ip: request.ip },
        );
        reply.code(202);
        return {
          status,
          message:
            status === 'changed'
              ? 'Email address changed.'
              : 'Check the new address for a confirmation link. The old address has been notified.',
        };
      },
    );

    app.post(
      '/api/auth/email/confirm',
      {
        onRequest: limited(),
        schema: {
          tags,
          summary: 'Confirm an email change with the token sent to the new address',
          body: Body({ token: TokenInput }),
          response: { 200: z.object({ user: UserView, message: z.string() }) },
        },
      },
      async (request) => {
        const user = await accounts.confirmEmailChange(request.body.token, { ip: request.ip });
        return { user, message: 'Email address changed.' };
      },
    );

    app.get(
      '/auth/confirm-email',
      {
        onRequest: limited(),
        schema: { hide: true, querystring: z.object({ token: z.string().max(512).optional() }) },
      },
      async (request, reply) => {
        const { token } = request.query;
        // Mail scanners probe links with HEAD: it never performs the action.
        if (request.method === 'HEAD') return reply.code(200).send();
        try {
          if (!token) throw new Error('missing token');
          await accounts.confirmEmailChange(token, { ip: request.ip });
          return reply.redirect('/?flash=email_changed', 303);
        } catch {
          if (token && (await accounts.linkAlreadyUsed('email_change', token))) {
            return reply.redirect('/?flash=email_already_changed', 303);
          }
          return reply.redirect('/?flash=email_change_link_invalid', 303);
        }
      },
    );

    app.get(
      '/api/auth/providers',
      {
        schema: {
          tags,
          summary: 'Sign-in methods offered by this instance (OAuth buttons are shown only when configured)',
          response: {
            200: z.object({
              password: z.literal(true),
              oauth: z.array(z.object({ id: z.literal('github'), url: z.string() })),
              registration_enabled: z.boolean(),
            }),
          },
        },
      },
      async () => ({
        password: true as const,
        oauth: config.oauth.github ? [{ id: 'github' as const, url: '/auth/oauth/github' }] : [],
        registration_enabled: config.registration.enabled,
      }),
    );
  };
}
