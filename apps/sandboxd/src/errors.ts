/** One error registry: domain code throws AppError with a machine code; the HTTP layer renders it. */
export const ERROR_STATUS = {
  bad_request: 400,
  unauthorized: 401,
  not_found: 404,
  sandbox_not_found: 404,
  checkpoint_not_found: 404,
  session_not_found: 404,
  sandbox_exists: 409,
  checkpoint_incompatible: 409,
  payload_too_large: 413,
  write_failed: 400,
  internal_error: 500,
  sandbox_unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  constructor(code: ErrorCode, message: string) {
    super(message);
    this.code = code;
    this.status = ERROR_STATUS[code];
  }
}

export function errorBody(err: unknown): { status: number; body: { error: string; message: string } } {
  if (err instanceof AppError) return { status: err.status, body: { error: err.code, message: err.message } };
  return { status: 500, body: { error: 'internal_error', message: 'internal error' } };
}
