// The standard routes of a named resource: list, create, get, replace and delete under one
// collection path. Thin: schema → service → reply; errors are AppErrors rendered by the one
// error handler. A domain with more (list filters, sub-resources) declares that itself.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { contextOf, type ResourceContext } from './context.ts';
import { IdParams } from './fields.ts';
import { ErrorResponse, ValidationErrorResponse } from './responses.ts';

interface CrudService<Input, View> {
  get(ctx: ResourceContext, id: string): Promise<View>;
  create(ctx: ResourceContext, input: Input): Promise<View>;
  update(ctx: ResourceContext, id: string, input: Input): Promise<View>;
  remove(ctx: ResourceContext, id: string): Promise<void>;
}

type IdParamsT = z.output<typeof IdParams>;
type ErrorResponses = Partial<Record<404 | 409, typeof ErrorResponse>>;

export interface NamedResourceRoutes<Input, View> {
  /** The collection path, e.g. /api/vaults; items live at `${path}/:id`. */
  path: string;
  tag: string;
  body: z.ZodType<Input>;
  /** Largest create/replace body in bytes: what the body schema's caps add up to (docs/api.md). */
  bodyLimit: number;
  view: z.ZodType<View>;
  /** Omitted when the domain declares its own list route (agents: filters) before calling this. */
  list?: { summary: string; load(ctx: ResourceContext): Promise<View[]> };
  summaries: {
    create: string;
    get: string;
    update: string;
    remove: string;
  };
  /** Error answers beyond 409/422 on create and 404 on delete. */
  createErrors?: ErrorResponses;
  removeErrors?: ErrorResponses;
  service: CrudService<Input, View>;
}

/**
 * The zod type provider cannot resolve a schema that is a type parameter, so request types
 * come from the route generics, and the body (validated by `body`) is asserted to be `Input`.
 */
export function registerNamedResourceRoutes<Input, View>(
  app: FastifyInstance,
  options: NamedResourceRoutes<Input, View>,
): void {
  const { path, tag, body, bodyLimit, view, list, summaries, service } = options;
  const security = [{ bearer: [] }];
  if (list) {
    app.get(
      path,
      {
        onRequest: [app.requireAuth],
        schema: {
          tags: [tag],
          summary: list.summary,
          security,
          response: { 200: z.object({ data: z.array(view) }) },
        },
      },
      async (request) => ({ data: await list.load(contextOf(request)) }),
    );
  }
  app.post<{ Body: Input }>(
    path,
    {
      onRequest: [app.requireAuth],
      bodyLimit,
      schema: {
        tags: [tag],
        summary: summaries.create,
        security,
        body,
        response: {
          201: view,
          ...options.createErrors,
          409: ErrorResponse,
          422: ValidationErrorResponse,
        },
      },
    },
    async (request, reply) => {
      reply.code(201);
      return await service.create(contextOf(request), request.body as Input);
    },
  );
  app.get<{ Params: IdParamsT }>(
    `${path}/:id`,
    {
      onRequest: [app.requireAuth],
      schema: {
        tags: [tag],
        summary: summaries.get,
        security,
        params: IdParams,
        response: { 200: view, 404: ErrorResponse },
      },
    },
    async (request) => await service.get(contextOf(request), request.params.id),
  );
  app.put<{ Params: IdParamsT; Body: Input }>(
    `${path}/:id`,
    {
      onRequest: [app.requireAuth],
      bodyLimit,
      schema: {
        tags: [tag],
        summary: summaries.update,
        security,
        params: IdParams,
        body,
        response: { 200: view, 404: ErrorResponse, 409: ErrorResponse, 422: ValidationErrorResponse },
      },
    },
    async (request) => await service.update(contextOf(request), request.params.id, request.body as Input),
  );
  app.delete<{ Params: IdParamsT }>(
    `${path}/:id`,
    {
      onRequest: [app.requireAuth],
      schema: {
        tags: [tag],
        summary: summaries.remove,
        security,
        params: IdParams,
        response: { 204: z.null().describe('deleted'), 404: ErrorResponse, ...options.removeErrors },
      },
    },
    async (request, reply) => {
      await service.remove(contextOf(request), request.params.id);
      return reply.code(204).send(null);
    },
  );
}
