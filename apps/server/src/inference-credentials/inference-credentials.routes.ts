// /api/account/inference-credentials: the account's provider keys, write-only. Thin: schema →
// service → reply. Conversation-scoped keys (the sandbox callback) are refused by requireAuth
// (no allowConversationScope here): a sandbox can neither read nor change its owner's keys.
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { AgentsService } from '../agents/agents.service.ts';
import type { Db } from '../db/database.ts';
import { contextOf } from '../resources/context.ts';
import { IdParams } from '../resources/fields.ts';
import { ErrorResponse, ValidationErrorResponse } from '../resources/responses.ts';
import { agentCredential } from './agent-credential.ts';
import {
  AgentCredentialQuery,
  AgentCredentialView,
  CredentialCheckQuery,
  InferenceCredentialBody,
  InferenceCredentialView,
  ProviderParams,
} from './inference-credentials.schema.ts';
import type { InferenceCredentialsService } from './inference-credentials.service.ts';

const PATH = '/api/account/inference-credentials';
const tags = ['Inference credentials'];

export function inferenceCredentialsRoutes(deps: {
  inferenceCredentials: InferenceCredentialsService;
  agents: AgentsService;
  db: Db;
}): FastifyPluginAsync {
  const service = deps.inferenceCredentials;
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();
    app.get(
      PATH,
      {
        onRequest: [app.requireAuth],
        schema: {
          tags,
          summary: 'List the inference providers and whether a key is set (never the key)',
          security: [{ bearer: [] }],
          response: { 200: z.object({ data: z.array(InferenceCredentialView) }), 401: ErrorResponse },
        },
      },
      async (request) => ({ data: await service.list(contextOf(request)) }),
    );
    app.put(
      `${PATH}/:provider`,
      {
        onRequest: [app.requireAuth],
        // A key of at most 4 KiB and a URL of at most 2 KiB, with room for JSON escapes.
        bodyLimit: 32 * 1024,
        schema: {
          tags,
          summary: 'Set (or replace) the API key and optional base URL of one provider',
          description:
            'provider: anthropic, openai or gemini. The key is stored encrypted and never returned; ' +
            "it is injected into the sandboxes of this account's conversations.",
          security: [{ bearer: [] }],
          params: ProviderParams,
          body: InferenceCredentialBody,
          response: { 200: InferenceCredentialView, 404: ErrorResponse, 422: ValidationErrorResponse },
        },
      },
      async (request) =>
        (await service.set(contextOf(request), request.params.provider, request.body)).credential,
    );
    app.delete(
      `${PATH}/:provider`,
      {
        onRequest: [app.requireAuth],
        schema: {
          tags,
          summary: 'Delete the key of one provider (204 also when none was set)',
          security: [{ bearer: [] }],
          params: ProviderParams,
          response: { 204: z.null().describe('deleted (or was not set)'), 404: ErrorResponse },
        },
      },
      async (request, reply) => {
        await service.remove(contextOf(request), request.params.provider);
        return reply.code(204).send(null);
      },
    );
    app.get(
      `${PATH}/check`,
      {
        onRequest: [app.requireAuth],
        schema: {
          tags,
          summary: 'Where the turns of an agent with these fields would get their provider key from',
          description:
            'For an agent not created yet (the agent form): runtime and model as in the agent, its ' +
            'environment_id, and the vault_id a conversation would start with. The same answer as ' +
            'GET /api/agents/:id/credential.',
          security: [{ bearer: [] }],
          querystring: CredentialCheckQuery,
          response: { 200: AgentCredentialView, 404: ErrorResponse, 422: ValidationErrorResponse },
        },
      },
      async (request) => {
        const q = request.query;
        return await agentCredential(
          deps.db,
          contextOf(request).tenantId,
          { runtime: q.runtime, model: q.model, environment_id: q.environment_id ?? null },
          q.vault_id ?? null,
        );
      },
    );
    app.get(
      '/api/agents/:id/credential',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags,
          summary:
            "Where an agent's turns get their provider key from (source null: nowhere, they fail at once)",
          description:
            "Names only, never a value: the agent's environment (a variable or a secret), the vault given " +
            "as vault_id (a secret), else the account's credential. The console warns before a conversation " +
            'starts with source null.',
          security: [{ bearer: [] }],
          params: IdParams,
          querystring: AgentCredentialQuery,
          response: { 200: AgentCredentialView, 404: ErrorResponse, 422: ValidationErrorResponse },
        },
      },
      async (request) => {
        const ctx = contextOf(request);
        const agent = await deps.agents.get(ctx, request.params.id);
        return await agentCredential(deps.db, ctx.tenantId, agent, request.query.vault_id ?? null);
      },
    );
  };
}
