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

/**
 * Query parameters that carry credentials (verification links, OAuth callbacks), by decoded
 * lower-case name: `?%74oken=`, `?TOKEN=` and `?to%6Ben=` are all `token` to the router.
 */
const CREDENTIAL_PARAMS = new Set([
  'token',
  'code',
  'state',
  'access_token',
  'refresh_token',
  'api_key',
  'password',
  'secret',
]);

/** A parameter name as the query parser sees it; null when it does not decode. */
function decodedName(raw: string): string | null {
  try {
    return decodeURIComponent(raw.replaceAll('+', ' ')).trim().toLowerCase();
  } catch {
    return null;
  }
}

/**
 * The URL with the value of every credential parameter replaced by `[redacted]`. Names are
 * compared after percent-decoding and case-folding; a name that does not decode is redacted
 * too (it could be anything). Used for every log line that carries a URL
 * (api-hardening.logs.test.ts).
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q === -1) return url;
  const hash = url.indexOf('#', q);
  const query = hash === -1 ? url.slice(q + 1) : url.slice(q + 1, hash);
  const redacted = query
    .split('&')
    .map((part) => {
      const eq = part.indexOf('=');
      if (eq === -1) return part;
      const name = decodedName(part.slice(0, eq));
      return name === null || CREDENTIAL_PARAMS.has(name) ? `${part.slice(0, eq)}=[redacted]` : part;
    })
    .join('&');
  return `${url.slice(0, q + 1)}${redacted}${hash === -1 ? '' : '#[redacted]'}`;
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

/** pino's numeric levels of warn and error; the JSON lines carry the label instead (formatters). */
const WARN = 40;
const ERROR = 50;
const LEVELS: Record<string, number> = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 };

/**
 * One readable line per entry (time, level, message, then the fields), written synchronously.
 * In colour (a terminal) a warning's message is yellow and an error's red, not only its label,
 * so neither scrolls by unseen among the info lines.
 */
function prettyStream(destination?: pino.DestinationStream, colorize?: boolean): pino.DestinationStream {
  return pretty({
    colorize: colorize ?? (destination === undefined && process.stdout.isTTY === true),
    translateTime: 'SYS:HH:MM:ss.l',
    ignore: 'pid,hostname,service',
    singleLine: true,
    sync: true,
    messageFormat: (log, messageKey, _label, { colors }) => {
      const message = String(log[messageKey] ?? '');
      const level = typeof log['level'] === 'number' ? log['level'] : (LEVELS[String(log['level'])] ?? 0);
      if (level >= ERROR) return colors.bold(colors.red(message));
      if (level >= WARN) return colors.yellow(message);
      return message;
    },
    ...(destination ? { destination } : {}),
  });
}

/** The format each logger was created with; the HTTP layer picks its access log by it. */
const formats = new WeakMap<Logger, LogFormat>();

/** `pretty` for a logger createLogger made readable; `json` otherwise. */
export function logFormatOf(logger: Logger): LogFormat {
  return formats.get(logger) ?? 'json';
}

export function createLogger(options: {
  level: string;
  format?: LogFormat;
  destination?: pino.DestinationStream;
  /** Colour in the readable format; by default when writing to a terminal. */
  colorize?: boolean;
}): Logger {
  const destination =
    options.format === 'pretty' ? prettyStream(options.destination, options.colorize) : options.destination;
  const logger = pino(
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
  formats.set(logger, options.format ?? 'json');
  return logger;
}
