// /api/conversations (except the log feed: stream.routes.ts). Thin: schema → service → reply.
// What a sandbox's key (conversation scope) may do on each route is sandbox-key.ts's rule: its
// hooks run before the body is validated, so the key learns nothing of a conversation it may
// not reach; it never prompts (the route does not opt in to conversation scope).
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { bearerToken, principalOf } from '../../auth/auth.plugin.ts';
import { ErrorResponse, ValidationErrorResponse } from '../../resources/responses.ts';
import {
  ConversationListQuery,
  ConversationPage,
  ConversationView,
  CreateConversationBody,
  IdParams,
  PROMPT_BODY_LIMIT,
  PromptBody,
  TurnView,
} from './conversations.schemas.ts';
import type { Caller, ConversationsService } from './conversations.service.ts';
import type { SandboxKeyRule } from './sandbox-key.ts';

const TAG = 'Conversations';
const security = [{ bearer: [] }];
const TurnEnvelope = z.object({ turn: TurnView });

function callerOf(request: FastifyRequest): Caller {
  const header = request.headers['x-paddock-client'];
  return {
    principal: principalOf(request),
    client: Array.isArray(header) ? header[0] : header,
    bearer: bearerToken(request),
  };
}

export function conversationsRoutes(deps: {
  conversations: ConversationsService;
  sandboxKey: SandboxKeyRule;
  /** Stops this process's conversation servers when the app closes. */
  onClose?: () => Promise<void>;
}): FastifyPluginAsync {
  const service = deps.conversations;
  const rule = deps.sandboxKey;
  const reads = { preValidation: rule.reads, config: { allowConversationScope: true } };
  const controls = { preValidation: rule.controls, config: { allowConversationScope: true } };
  const deletes = { preValidation: rule.deletes, config: { allowConversationScope: true } };
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();
    if (deps.onClose) {
      const onClose = deps.onClose;
      app.addHook('onClose', async () => await onClose());
    }

    app.post(
      '/api/conversations',
      {
        onRequest: [app.requireAuth],
        bodyLimit: PROMPT_BODY_LIMIT,
        config: { allowConversationScope: true },
        schema: {
          tags: [TAG],
          summary: 'Start a conversation: the gates, then a sandbox is provisioned and the prompt runs',
          security,
          body: CreateConversationBody,
          response: {
            201: ConversationView,
            402: ErrorResponse,
            403: ErrorResponse,
            404: ErrorResponse,
            422: ValidationErrorResponse,
            429: ErrorResponse,
          },
        },
      },
      async (request, reply) => {
        const view = await service.create(callerOf(request), request.body);
        return reply.code(201).send(view);
      },
    );

    app.get(
      '/api/conversations',
      {
        onRequest: [app.requireAuth],
        config: { allowConversationScope: true },
        schema: {
          tags: [TAG],
          summary: 'List conversations, newest first, with optional status, agent and parent filters',
          security,
          querystring: ConversationListQuery,
          response: { 200: ConversationPage, 422: ValidationErrorResponse },
        },
      },
      async (request) => {
        const q = request.query;
        const principal = principalOf(request);
        const tree = rule.listRoot(principal);
        return await service.list(principal.tenantId, {
          limit: q.limit,
          ...(tree ? { tree } : {}),
          ...(q.cursor ? { cursor: q.cursor } : {}),
          ...(q.status ? { status: q.status } : {}),
          ...(q.agent_id ? { agentId: q.agent_id } : {}),
          ...(q.parent_id ? { parentId: q.parent_id } : {}),
        });
      },
    );

    app.get(
      '/api/conversations/:id',
      {
        onRequest: [app.requireAuth],
        ...reads,
        schema: {
          tags: [TAG],
          summary: 'Get a conversation',
          security,
          params: IdParams,
          response: { 200: ConversationView, 404: ErrorResponse },
        },
      },
      async (request) => await service.get(principalOf(request).tenantId, request.params.id),
    );

    app.delete(
      '/api/conversations/:id',
      {
        onRequest: [app.requireAuth],
        ...deletes,
        schema: {
          tags: [TAG],
          summary: 'Delete a conversation: destroys its sandbox and removes its turns and logs',
          security,
          params: IdParams,
          response: { 204: z.null(), 403: ErrorResponse, 404: ErrorResponse, 409: ErrorResponse },
        },
      },
      async (request, reply) => {
        await service.remove(principalOf(request).tenantId, request.params.id);
        return reply.code(204).send(null);
      },
    );

    app.get(
      '/api/conversations/:id/turns',
      {
        onRequest: [app.requireAuth],
        ...reads,
        schema: {
          tags: [TAG],
          summary: "A conversation's turns, in order",
          security,
          params: IdParams,
          response: { 200: z.object({ data: z.array(TurnView) }), 404: ErrorResponse },
        },
      },
      async (request) => ({ data: await service.turns(principalOf(request).tenantId, request.params.id) }),
    );

    app.post(
      '/api/conversations/:id/prompts',
      {
        onRequest: [app.requireAuth],
        bodyLimit: PROMPT_BODY_LIMIT,
        schema: {
          tags: [TAG],
          summary: 'Send a follow-up prompt: queues the next turn (re-provisions when the sandbox is gone)',
          security,
          params: IdParams,
          body: PromptBody,
          response: {
            202: TurnEnvelope,
            402: ErrorResponse,
            403: ErrorResponse,
            404: ErrorResponse,
            409: ErrorResponse,
            410: ErrorResponse,
            422: ValidationErrorResponse,
            429: ErrorResponse,
            503: ErrorResponse,
          },
        },
      },
      async (request, reply) => {
        const turn = await service.prompt(principalOf(request).tenantId, request.params.id, request.body);
        return reply.code(202).send({ turn });
      },
    );

    app.post(
      '/api/conversations/:id/interrupt',
      {
        onRequest: [app.requireAuth],
        ...controls,
        schema: {
          tags: [TAG],
          summary: 'Interrupt the running turn (SIGTERM to its process group, SIGKILL after 5 s)',
          security,
          params: IdParams,
          response: {
            202: TurnEnvelope,
            403: ErrorResponse,
            404: ErrorResponse,
            409: ErrorResponse,
            410: ErrorResponse,
            503: ErrorResponse,
          },
        },
      },
      async (request, reply) => {
        const turn = await service.interrupt(principalOf(request).tenantId, request.params.id);
        return reply.code(202).send({ turn });
      },
    );

    app.post(
      '/api/conversations/:id/terminate',
      {
        onRequest: [app.requireAuth],
        ...controls,
        schema: {
          tags: [TAG],
          summary: 'Terminate: destroys the sandbox; the conversation accepts no more prompts',
          security,
          params: IdParams,
          response: {
            200: ConversationView,
            403: ErrorResponse,
            404: ErrorResponse,
            409: ErrorResponse,
            410: ErrorResponse,
            503: ErrorResponse,
          },
        },
      },
      async (request) => await service.terminate(principalOf(request).tenantId, request.params.id),
    );
  };
}
