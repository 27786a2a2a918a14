import pino, { type Logger } from 'pino';

export type { Logger };

/** Paths whose values must never reach a log line (credentials travel in these). */
const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["x-csrf-token"]',
  'res.headers["set-cookie"]',
  '*.password',
  '*.new_password',
  '*.current_password',
  '*.token',
  '*.api_key',
  '*.value',
  '*.secret',
];

/** Query parameters that carry one-time credentials (verification links, OAuth callbacks). */
const CREDENTIAL_PARAMS = /([?&](?:token|code|state)=)[^&#]*/gi;

function redactUrl(url: string): string {
  return url.replace(CREDENTIAL_PARAMS, '$1[redacted]');
}

interface LoggedRequest {
  method?: string;
  url?: string;
  host?: string;
  ip?: string;
  socket?: { remoteAddress?: string; remotePort?: number };
}

export function createLogger(options: { level: string; destination?: pino.DestinationStream }): Logger {
  return pino(
    {
      level: options.level,
      base: { service: 'paddock-server' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      serializers: {
        req: (req: LoggedRequest) => ({
          method: req.method,
          url: redactUrl(req.url ?? ''),
          host: req.host,
          remoteAddress: req.ip ?? req.socket?.remoteAddress,
          remotePort: req.socket?.remotePort,
        }),
      },
      formatters: { level: (label) => ({ level: label }) },
    },
    options.destination,
  );
}
