// GET /api/conversations/:id/terminal (WebSocket upgrade): an interactive shell in the
// conversation's live sandbox. Admission happens before the upgrade, so every refusal is a plain
// HTTP answer with the usual error body; terminal.ts runs the admitted connection.
//
// Who (docs/security.md, "The terminal"; tests in test/work.terminal.test.ts):
// 1. The conversation's tenant with a full credential only: an API key (`Authorization: Bearer`,
//    the CLI) or the session cookie. Another tenant's id is 404 like a missing one; the sandbox
//    key (PADDOCK_TOKEN) is 403 (requireAuth: this route does not opt into conversation scope).
// 2. A cookie is sent by the browser whichever page opens the socket, and a WebSocket is not
//    subject to CORS: a cookie-authenticated upgrade must carry an Origin that is this site
//    (PUBLIC_URL's origin, or one of CHECK_ORIGIN_EXTRA; csrf.ts allowedOrigins), else 403
//    `csrf_failed`. A bearer upgrade is exempt (a browser never adds that header by itself).
// 3. No live sandbox: 409 `sandbox_not_running`; the bounds: 429 `too_many_terminals`.
// 4. Audited before the upgrade (`conversation.terminal.opened`): no row, no terminal.
import websocket from '@fastify/websocket';
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { type AuditService, auditActorFrom } from '../../audit/audit.service.ts';
import { principalOf } from '../../auth/auth.plugin.ts';
import { allowedOrigins, csrfError, requestOrigin } from '../../auth/csrf.ts';
import type { Config } from '../../config/config.ts';
import { AppError } from '../../http/errors.ts';
import type { Logger } from '../../observability/logger.ts';
import { ErrorResponse } from '../../resources/responses.ts';
import { type LiveSandbox, liveSandboxOf, type WorkAccessDeps, workRedactor } from './files-access.ts';
import {
  DEFAULT_COLS,
  DEFAULT_ROWS,
  MAX_INPUT_FRAME,
  runTerminal,
  type TerminalSlot,
  type Terminals,
} from './terminal.ts';

export interface TerminalRoutesDeps extends WorkAccessDeps {
  config: Config;
  audit: Pick<AuditService, 'record'>;
  logger: Logger;
  terminals: Terminals;
}

const Params = z.object({ id: z.string().max(200) });
const Size = z.coerce.number().int().min(1).max(1000);
const Query = z.object({
  cols: Size.optional().describe(`Initial columns (default ${DEFAULT_COLS})`),
  rows: Size.optional().describe(`Initial rows (default ${DEFAULT_ROWS})`),
});

interface Admitted {
  live: LiveSandbox;
  slot: TerminalSlot;
}

export function terminalRoutes(deps: TerminalRoutesDeps): FastifyPluginAsync {
  return async (root) => {
    await root.register(websocket, { options: { maxPayload: MAX_INPUT_FRAME, perMessageDeflate: false } });
    const app = root.withTypeProvider<ZodTypeProvider>();
    const origins = allowedOrigins(deps.config);
    const admitted = new WeakMap<object, Admitted>();

    // The full declaration (handler + wsHandler), not `websocket: true`, which would hide the
    // route from the OpenAPI document. A plain GET is 426 before anything is admitted.
    app.route({
      method: 'GET',
      url: '/api/conversations/:id/terminal',
      onRequest: [app.requireAuth],
      schema: {
        tags: ['Conversations'],
        summary: "Open an interactive shell in the conversation's live sandbox (WebSocket)",
        description:
          'A WebSocket upgrade. Binary frames carry terminal bytes both ways (the output redacted); text frames ' +
          'are JSON: `{"type":"resize","cols":N,"rows":M}` from the client, `{"type":"exit","code":N}` from the ' +
          'server before it closes. Authenticate with `Authorization: Bearer <API key>`, or the session cookie ' +
          "from this site's own origin (or CHECK_ORIGIN_EXTRA). Every open is audited. " +
          '409 `sandbox_not_running` when the sandbox is not live (send a prompt to wake it).',
        security: [{ bearer: [] }],
        params: Params,
        querystring: Query,
        response: {
          101: z.null().describe('Switching Protocols: the terminal WebSocket'),
          default: ErrorResponse.describe(
            'Any other refusal (401 without credentials, 503 while the database is unavailable)',
          ),
          403: ErrorResponse,
          404: ErrorResponse,
          409: ErrorResponse,
          426: ErrorResponse,
          429: ErrorResponse,
        },
      },
      preHandler: async (request) => {
        if (!request.ws)
          throw new AppError(
            'upgrade_required',
            'this is a WebSocket endpoint: open it with an upgrade (`paddock shell`, the console, or a WebSocket client)',
            { headers: { upgrade: 'websocket' } },
          );
        const principal = principalOf(request);
        if (principal.via === 'session') {
          const origin = requestOrigin(request);
          if (origin === null || !origins.has(origin)) throw csrfError();
        }
        const live = await liveSandboxOf(deps.db, principal, request.params.id);
        const slot = deps.terminals.take(principal.userId, live.conversationId);
        // Released exactly once, when the connection's socket closes, upgraded or not.
        const raw = request.raw.socket;
        raw.once('close', () => slot.release());
        if (raw.destroyed) slot.release();
        try {
          await deps.audit.record({
            type: 'conversation.terminal.opened',
            tenantId: principal.tenantId,
            actor: auditActorFrom(principal),
            ip: request.ip,
            metadata: {
              conversation_id: live.conversationId,
              sandbox: live.name,
              cols: request.query.cols ?? DEFAULT_COLS,
              rows: request.query.rows ?? DEFAULT_ROWS,
            },
          });
        } catch (error) {
          slot.release();
          throw error;
        }
        admitted.set(request, { live, slot });
      },
      handler: async () => {
        throw new AppError('upgrade_required', 'this is a WebSocket endpoint: open it with an upgrade');
      },
      wsHandler: async (socket, request) => {
        const entry = admitted.get(request);
        if (!entry) {
          socket.close(1011);
          return;
        }
        // Input that arrives while the redactor is built waits in the socket's buffer.
        socket.pause();
        let registry: Awaited<ReturnType<typeof workRedactor>>;
        try {
          registry = await workRedactor(deps, entry.live);
        } catch (error) {
          deps.logger.warn({ err: error }, 'terminal: the redactor could not be built');
          socket.close(1011);
          return;
        }
        const principal = principalOf(request);
        const done = runTerminal(deps, socket, {
          live: entry.live,
          registry,
          cols: request.query.cols ?? DEFAULT_COLS,
          rows: request.query.rows ?? DEFAULT_ROWS,
          options: deps.terminals.options,
          audit: { actor: auditActorFrom(principal), ip: request.ip },
        });
        socket.resume();
        await done;
      },
    });
  };
}
