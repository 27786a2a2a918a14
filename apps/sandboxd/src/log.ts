/**
 * A minimal JSON-lines logger (pino is not a dependency of this workspace).
 * Callers must never pass exec environment values: they carry secrets.
 */
export type Level = 'debug' | 'info' | 'warn' | 'error';
const ORDER: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
}

/** `time LEVEL message key=value ...`, for a person at a terminal. */
function prettyLine(line: Record<string, unknown>): string {
  const { level, time, msg, ...fields } = line;
  const clock = String(time).slice(11, 23);
  const rest = Object.entries(fields)
    .map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join(' ');
  return `[${clock}] ${String(level).toUpperCase()} sandboxd: ${String(msg)}${rest ? ` ${rest}` : ''}\n`;
}

export function createLogger(
  level: Level = 'info',
  out: NodeJS.WritableStream = process.stderr,
  format: 'json' | 'pretty' = 'json',
): Logger {
  const min = ORDER[level];
  const write = (lvl: Level, msg: string, fields?: Record<string, unknown>): void => {
    if (ORDER[lvl] < min) return;
    const line: Record<string, unknown> = { level: lvl, time: new Date().toISOString(), msg };
    if (fields) {
      for (const [k, v] of Object.entries(fields)) {
        line[k] = v instanceof Error ? { message: v.message, code: (v as NodeJS.ErrnoException).code } : v;
      }
    }
    out.write(format === 'pretty' ? prettyLine(line) : `${JSON.stringify(line)}\n`);
  };
  return {
    debug: (m, f) => write('debug', m, f),
    info: (m, f) => write('info', m, f),
    warn: (m, f) => write('warn', m, f),
    error: (m, f) => write('error', m, f),
  };
}
