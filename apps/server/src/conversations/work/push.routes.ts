// POST /api/conversations/:id/push: push a branch (and open a pull request) from the live sandbox
// (push.service.ts). The owner's user or a full API key only: the route does not opt in to
// conversation scope, so a sandbox key (PADDOCK_TOKEN) is refused with 403 by the auth plugin
// before the body is read. An agent that could push would publish anything, with the
// environment's token, without the person looking.
import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { auditActorFrom } from '../../audit/audit.service.ts';
import { principalOf } from '../../auth/auth.plugin.ts';
import { ErrorResponse, ValidationErrorResponse } from '../../resources/responses.ts';
import type { PushService } from './push.service.ts';

const TAG = 'Conversations';
const security = [{ bearer: [] }];

const nonBlank = (max: number) =>
  z
    .string()
    .max(max)
    .refine((s) => s.trim().length > 0, 'must not be empty');

export const PushBody = z
  .object({
    repo: z
      .string()
      .max(200)
      .optional()
      .describe("the repository's directory under /home/sandbox; needed when the environment clones several"),
    branch: z
      .string()
      .max(255)
      .optional()
      .describe(
        'default: the branch this sandbox pushed last for the repository, else paddock/<last 8 hex digits of the conversation id>-<n>',
      ),
    message: nonBlank(10_000)
      .optional()
      .describe("the commit message for uncommitted work; default: the latest prompt's first line"),
    pull_request: z
      .union([
        z.boolean(),
        z
          .object({
            title: nonBlank(256).optional(),
            body: z.string().max(65_536).optional(),
            base: z.string().max(255).optional().describe("default: the repository's default branch"),
          })
          .strict(),
      ])
      .optional()
      .describe('open a pull request (GitHub) or merge request (GitLab) for the branch'),
  })
  .strict();

export const PullRequestView = z.object({
  repo: z.string(),
  branch: z.string(),
  provider: z.enum(['github', 'gitlab']),
  number: z.number().int(),
  url: z.string(),
  created_at: z.string(),
});

export const PushResponse = z.object({
  push: z.object({
    repo: z.string(),
    branch: z.string(),
    commit: z.string(),
    committed: z.boolean().describe('whether uncommitted work was committed first'),
    remote: z.string(),
  }),
  pull_request: PullRequestView.extend({
    created: z.boolean().describe('false: one was open for the branch already, and is returned'),
    base: z.string(),
  }).nullable(),
});

export const PushPlanView = z.object({
  repos: z.array(
    z.object({
      repo: z.string().describe("the repository's directory under /home/sandbox"),
      remote: z.string().describe("the repository's URL, origin and path"),
      has_token: z.boolean().describe('whether the environment names a token for it (needed to push)'),
      branch: z.string().describe('the branch a push without `branch` uses'),
    }),
  ),
  message: z.string().describe('the commit message a push without `message` uses'),
  ready: z.boolean().describe('whether a push can run now'),
  reason: z.string().nullable().describe('why not, and what to do'),
});

export function pushRoutes(deps: { pushes: PushService }): FastifyPluginAsync {
  return async (root) => {
    const app = root.withTypeProvider<ZodTypeProvider>();
    app.get(
      '/api/conversations/:id/push',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: [TAG],
          summary:
            "What a push would do by default: the environment's repositories, the branch and the message",
          security,
          params: z.object({ id: z.string().max(200) }),
          response: { 200: PushPlanView, 403: ErrorResponse, 404: ErrorResponse },
        },
      },
      async (request) => await deps.pushes.plan(principalOf(request).tenantId, request.params.id),
    );
    app.post(
      '/api/conversations/:id/push',
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: [TAG],
          summary:
            "Push a branch from the live sandbox: commits the agent's uncommitted work, pushes it with the environment repository's token; optionally opens a pull request",
          security,
          params: z.object({ id: z.string().max(200) }),
          body: PushBody,
          response: {
            200: PushResponse,
            403: ErrorResponse,
            404: ErrorResponse,
            409: ErrorResponse,
            410: ErrorResponse,
            422: ValidationErrorResponse,
            502: ErrorResponse,
          },
        },
      },
      async (request) => {
        const principal = principalOf(request);
        return await deps.pushes.push(
          { tenantId: principal.tenantId, actor: auditActorFrom(principal), ip: request.ip },
          request.params.id,
          request.body,
        );
      },
    );
  };
}
