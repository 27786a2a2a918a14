// Every failure the CLI reports: a clear one-line message (plus field errors), exit code 1.
export class CliError extends Error {
  readonly details: readonly string[];
  readonly exitCode: number;
  constructor(message: string, details: readonly string[] = [], exitCode = 1) {
    super(message);
    this.name = 'CliError';
    this.details = details;
    this.exitCode = exitCode;
  }
}

/** A refusal by the server: its status and machine code, for callers that act on them. */
export class ApiError extends CliError {
  readonly status: number;
  readonly code: string | null;
  readonly retryAfterSeconds: number | null;
  /** The server's own `message`, when its answer had one (the CLI's message may say something else). */
  readonly serverMessage: string | null;
  constructor(
    message: string,
    meta: {
      status: number;
      code: string | null;
      retryAfterSeconds: number | null;
      serverMessage?: string | null;
    },
    details: readonly string[] = [],
  ) {
    super(message, details);
    this.name = 'ApiError';
    this.status = meta.status;
    this.code = meta.code;
    this.retryAfterSeconds = meta.retryAfterSeconds;
    this.serverMessage = meta.serverMessage ?? null;
  }
}

/** `field: message` lines from a 422 body's `errors` map. */
export function fieldErrorLines(errors: unknown): string[] {
  if (!errors || typeof errors !== 'object') return [];
  const out: string[] = [];
  for (const [field, messages] of Object.entries(errors as Record<string, unknown>)) {
    for (const m of Array.isArray(messages) ? messages : [messages]) out.push(`${field}: ${String(m)}`);
  }
  return out;
}
