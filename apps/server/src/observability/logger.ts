import pino, { type Logger } from 'pino';
import pretty from 'pino-pretty';

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

export type LogFormat = 'json' | 'pretty';

/** LOG_FORMAT when set; otherwise readable lines for a person at a terminal, JSON for machines and production. */
export function resolveLogFormat(
  configured: LogFormat | 'auto',
  isProduction: boolean,
  isTTY = process.stdout.isTTY === true,
): LogFormat {
  if (configured !== 'auto') return configured;
  return isTTY && !isProduction ? 'pretty' : 'json';
}

/** One readable line per entry (time, level, message, then the fields), written synchronously. */
function prettyStream(destination?: pino.DestinationStream): pino.DestinationStream {
  return pretty({
    colorize: destination === undefined && process.stdout.isTTY === true,
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,service',
    singleLine: true,
    sync: true,
    ...(destination ? { destination } : {}),
  });
}

export function createLogger(options: {
  level: string;
  format?: LogFormat;
  destination?: pino.DestinationStream;
}): Logger {
  const destination = options.format === 'pretty' ? prettyStream(options.destination) : options.destination;
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
    destination,
  );
}
