// The access log of the readable format (LOG_FORMAT=pretty: `npm start`'s terminal). A console
// polls several endpoints a second, so one line per request would bury every warning: here a
// request writes one short line (`GET /api/x 500 12 ms`) only when it failed on the server
// (error) or took SLOW_REQUEST_MS or longer (warn); every other request, 4xx included, is a
// debug line. The JSON format keeps Fastify's own `incoming request` / `request completed`
// lines at info for every request (app.ts), for log shippers that count them.
import type { FastifyInstance } from 'fastify';
import { redactUrl } from '../observability/logger.ts';

/** A request answered in this long or longer is named in the readable log (event streams excepted). */
export const SLOW_REQUEST_MS = 1000;

export function registerReadableAccessLog(app: FastifyInstance): void {
  app.addHook('onResponse', async (request, reply) => {
    const status = reply.statusCode;
    const ms = reply.elapsedTime;
    const line = `${request.method} ${redactUrl(request.url)} ${status} ${Math.round(ms)} ms`;
    // An event stream stays open for as long as its viewer watches: long is its normal.
    const stream = String(reply.getHeader('content-type') ?? '').startsWith('text/event-stream');
    if (status >= 500) request.log.error(line);
    else if (ms >= SLOW_REQUEST_MS && !stream) request.log.warn(`${line} (slow)`);
    else request.log.debug(line);
  });
}
