// The JSON body parser of the public app: sizes before parsing (issue 14, finding 1).
// What must hold (api-hardening.flood.test.ts):
// - A body's shape (entries, depth, values, key lengths) is scanned chunk by chunk as it
//   arrives (json-bounds.ts); the first problem answers 422 at once, and the rest of the
//   body is read and dropped without being kept, so a 10 MiB flood costs a scan of its
//   first kilobytes and the connection stays usable.
// - A body over the route's limit answers 413, from its Content-Length before a byte is
//   read, or as soon as more bytes than the limit have arrived.
// - Only a body that passes reaches Fastify's own JSON parser (prototype-poisoning
//   protection, its message for a malformed body).
// - An empty body (or only whitespace) under `Content-Type: application/json` is no body: a
//   route without one (DELETE, interrupt, terminate) answers as usual, one that needs a body
//   answers 422 for its missing fields (clients that send the header on every request work).
// - Every body is JSON: a body of any other media type (text/plain, which Fastify would parse as
//   a string for the schema to refuse with 422, or one it does not know, or none named) answers
//   400 invalid_body, as docs/api.md documents, on every route (test: foundation.http.test.ts
//   "answers 400 invalid_body to a body that is not JSON"). It is read and dropped within the
//   route's limit, so the connection stays usable.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from './errors.ts';
import { createJsonShapeScanner, type ShapeProblem } from './json-bounds.ts';

/** The body of a request refused while it streamed in; preValidation answers the refusal. */
export class RefusedBody {
  readonly problem: ShapeProblem;
  constructor(problem: ShapeProblem) {
    this.problem = problem;
  }
}

export function shapeError(problem: ShapeProblem): AppError {
  return AppError.validation({ [problem.path === '' ? 'body' : problem.path]: [problem.message] });
}

function tooLarge(limit: number): AppError {
  return new AppError('payload_too_large', `request body is larger than this route accepts (${limit} bytes)`);
}

export function registerJsonBodyParser(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  const limitOf = (request: FastifyRequest) => request.routeOptions.bodyLimit ?? app.initialConfig.bodyLimit;
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', (request, payload, done) => {
    const limit = limitOf(request);
    if (Number(request.headers['content-length']) > limit) {
      done(tooLarge(limit), undefined);
      return;
    }
    let received = 0;
    let settled = false;
    const settle = (err: Error) => {
      if (settled) return;
      settled = true;
      done(err, undefined);
    };
    payload.on('data', (chunk: Buffer) => {
      received += chunk.length;
      if (received > limit) settle(tooLarge(limit));
    });
    payload.on('end', () =>
      settle(new AppError('invalid_body', 'the request body must be JSON (Content-Type: application/json)')),
    );
    payload.on('error', (err: Error) => settle(err));
  });
  app.addContentTypeParser('application/json', (request, payload, done) => {
    const limit = limitOf(request);
    if (Number(request.headers['content-length']) > limit) {
      done(tooLarge(limit), undefined);
      return;
    }
    const scanner = createJsonShapeScanner();
    const chunks: Buffer[] = [];
    let received = 0;
    let settled = false;
    const settle = (err: Error | null, body?: unknown) => {
      if (settled) return;
      settled = true;
      chunks.length = 0;
      done(err, body);
    };
    payload.on('data', (chunk: Buffer) => {
      if (settled) return;
      received += chunk.length;
      if (received > limit) return settle(tooLarge(limit));
      const problem = scanner.write(chunk);
      if (problem) return settle(null, new RefusedBody(problem));
      chunks.push(chunk);
    });
    payload.on('end', () => {
      if (settled) return;
      settled = true;
      const text = Buffer.concat(chunks).toString('utf8');
      if (text.trim() === '') {
        done(null, undefined);
        return;
      }
      parseJson(request, text, done);
    });
    payload.on('error', (err: Error) => settle(err));
  });
}
