// Answers to requests that fail before routing (issue 14, finding 10): a URL the router
// cannot decode, a path parameter over its length, and what Node's HTTP parser refuses
// (header overflow, a malformed request line or Content-Length). What must hold
// (api-hardening.early-errors.test.ts): every such answer has the API's error shape
// `{error, message}` and the security headers; a routed-but-refused URL also carries a
// request id and counts against the caller's rate limit; no answer echoes the URL.
import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../config/config.ts';
import { AppError, ERROR_CODES, type ErrorBody, type ErrorCode } from './errors.ts';
import { securityHeaders } from './plugins/security.ts';

/** Fastify's `frameworkErrors`: errors raised while matching a route, with a request. */
export function createFrameworkErrorHandler(appOf: () => FastifyInstance, config: Pick<Config, 'httpsOnly'>) {
  const headers = securityHeaders(config);
  let limiter: ReturnType<FastifyInstance['rateLimit']> | undefined;
  return async (error: FastifyError, request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    // No hook runs for these replies (no onRequest, no onSend): set what they would have.
    reply.header('x-request-id', request.id);
    for (const [k, v] of Object.entries(headers)) reply.header(k, v);
    const app = appOf();
    limiter ??= app.rateLimit();
    try {
      // The same per-IP limit as every other request: no onRequest hook runs for these.
      await limiter.call(app, request, reply);
    } catch (err) {
      if (err instanceof AppError) {
        for (const [k, v] of Object.entries(err.headers)) reply.header(k, v);
        const body: ErrorBody = { error: err.code, message: err.message };
        await reply.code(err.status).send(body);
        return;
      }
      throw err;
    }
    const tooLong = error.code === 'FST_ERR_MAX_PARAM_LENGTH';
    const body: ErrorBody = tooLong
      ? { error: 'uri_too_long', message: 'a path segment of this URL is too long' }
      : { error: 'bad_request', message: 'the URL is not valid (a malformed percent-encoding?)' };
    await reply.code(tooLong ? ERROR_CODES.uri_too_long : ERROR_CODES.bad_request).send(body);
  };
}

const CLIENT_ERRORS: Record<string, { code: ErrorCode; message: string }> = {
  HPE_HEADER_OVERFLOW: {
    code: 'headers_too_large',
    message: 'the request line and headers are larger than this server accepts',
  },
};

/**
 * Fastify's `clientErrorHandler`: Node's HTTP parser refused the request, so there is no
 * request object; the answer is written to the socket with the same shape and headers.
 */
export function createClientErrorHandler(config: Pick<Config, 'httpsOnly'>) {
  const headers = securityHeaders(config);
  return (err: NodeJS.ErrnoException, socket: Socket): void => {
    if (!socket.writable) {
      socket.destroy();
      return;
    }
    if (err.code === 'ECONNRESET' || err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      socket.destroy(err);
      return;
    }
    const known = CLIENT_ERRORS[err.code ?? ''];
    const code: ErrorCode = known?.code ?? 'bad_request';
    const status = ERROR_CODES[code];
    const payload = JSON.stringify({
      error: code,
      message: known?.message ?? 'the request could not be read as HTTP',
    } satisfies ErrorBody);
    const lines = [
      `HTTP/1.1 ${status} ${status === 431 ? 'Request Header Fields Too Large' : 'Bad Request'}`,
      'content-type: application/json; charset=utf-8',
      `content-length: ${Buffer.byteLength(payload)}`,
      `x-request-id: ${randomUUID()}`,
      'connection: close',
      ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`),
    ];
    socket.end(`${lines.join('\r\n')}\r\n\r\n${payload}`);
  };
}
