// The one error registry: domain code throws AppError with a machine code, and the
// Fastify error handler (app.ts) renders `{ error, message, ...extra }` with the status
// registered here. Routes never hand-build error bodies.
export const ERROR_CODES = {
  invalid_body: 400,
  /** A request the HTTP parser or the router could not read (malformed line, header, length, URL). */
  bad_request: 400,
  /** A query parameter the endpoint cannot use (GET /api/account/usage: from and to). */
  invalid_query: 400,
  /** A billing webhook whose signature does not verify under BILLING_WEBHOOK_SECRET (or none is set). */
  invalid_signature: 400,
  unauthorized: 401,
  subscription_required: 402,
  forbidden: 403,
  /** A suspended account cannot start or continue conversations. */
  account_suspended: 403,
  /** A sandbox key starts a sub-conversation on an agent outside its environment, not delegated. */
  agent_not_delegated: 403,
  /** A sandbox key starts a sub-conversation with another vault than its own, not delegated. */
  vault_not_delegated: 403,
  /** A sandbox key's sub-conversation would be deeper than sandbox-key.ts MAX_DEPTH. */
  sub_conversation_depth_exceeded: 403,
  csrf_failed: 403,
  email_not_verified: 403,
  account_unavailable: 403,
  registration_closed: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  /** Checkout while the account has a live subscription (active, trialing or past_due at the processor). */
  subscription_exists: 409,
  /** Checkout for a comped account: it is never offered one. */
  checkout_not_offered: 409,
  /** The billing portal before the account has a customer at the processor (no checkout yet). */
  no_billing_customer: 409,
  /** The sandbox runs but its changes could not be computed there (its git failed, a tree made unreadable). */
  changes_unavailable: 409,
  /** An admin asked for a reset link where no mail can be made (EMAIL_DELIVERY=none outside development). */
  mail_unavailable: 409,
  /** A prompt while a turn runs. */
  conversation_busy: 409,
  /** A prompt, interrupt or terminate to a conversation whose provisioning failed. */
  conversation_failed: 409,
  /** An interrupt while no turn runs. */
  no_turn_running: 409,
  /** A prompt beyond the bytes of prompts and images one conversation may store. */
  conversation_storage_exceeded: 409,
  /** A data export while the account's previous one is still being built. */
  export_in_progress: 409,
  /** A download of a data export that is not built (yet, or failed). */
  export_not_ready: 409,
  /**
   * A request that needs the conversation's live sandbox (changes, files, terminal, push) while it has
   * none (never provisioned, reclaimed after idle, terminated): a prompt wakes it.
   */
  sandbox_not_running: 409,
  /** A push to a branch that exists on the remote with commits the pushed one does not contain. */
  branch_exists: 409,
  /** The remote refused the push (a protected branch, a pre-receive hook); its words quoted. */
  push_rejected: 409,
  conversation_terminated: 410,
  /** A download of a data export past its expiry. */
  export_expired: 410,
  payload_too_large: 413,
  /** A file (or a directory's tarball) over the files API's bound (docs/api.md, "Files"). */
  file_too_large: 413,
  uri_too_long: 414,
  validation_failed: 422,
  /** The vault is not on the agent's allowlist. */
  vault_not_allowed: 422,
  /** A push or pull request for an environment repository without an access token. */
  push_token_missing: 422,
  /** The remote refused the environment repository's token (wrong, expired or without write access). */
  push_auth_failed: 422,
  /** The provider's API did not open the pull (merge) request; its words quoted. */
  pull_request_refused: 422,
  rate_limited: 429,
  /** The concurrent-sandbox quota per user is reached (with Retry-After). */
  sandbox_quota_exceeded: 429,
  /** A conversation has sandbox-key.ts MAX_LIVE_CHILDREN children with a live sandbox (with Retry-After). */
  sub_conversation_limit_exceeded: 429,
  /** The open log streams per user in this process are at their cap (with Retry-After). */
  too_many_streams: 429,
  /** The open terminals of a conversation or a user in this process are at their cap (with Retry-After). */
  too_many_terminals: 429,
  /** A plain GET of a WebSocket endpoint (the terminal). */
  upgrade_required: 426,
  headers_too_large: 431,
  internal_error: 500,
  /** A verified billing event whose apply failed: recorded, listed on /admin/billing, applied on redelivery. */
  billing_event_failed: 500,
  /** git could not push (the remote unreachable, a failure that is none of the above); git's words quoted. */
  push_failed: 502,
  /** The provider's API did not answer. */
  pull_request_failed: 502,
  service_unavailable: 503,
  /** The payment processor is unreachable or refused (checkout, portal): try again later. */
  billing_unavailable: 503,
  /** Billing is on but BILLING_STRIPE_SECRET_KEY is unset (development): checkout and portal cannot work. */
  billing_not_configured: 503,
  /** Prompt, interrupt or terminate while the conversation's server provisions (with Retry-After). */
  conversation_provisioning: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_CODES;

export type FieldErrors = Record<string, string[]>;

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly extra: Record<string, unknown>;
  readonly headers: Record<string, string>;

  constructor(
    code: ErrorCode,
    message: string,
    options: { extra?: Record<string, unknown>; headers?: Record<string, string>; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.status = ERROR_CODES[code];
    this.extra = options.extra ?? {};
    this.headers = options.headers ?? {};
  }

  static notFound(what = 'resource'): AppError {
    return new AppError('not_found', `${what} not found`);
  }

  static validation(errors: FieldErrors, message = 'validation failed'): AppError {
    return new AppError('validation_failed', message, { extra: { errors } });
  }
}

/** Body of an error response: the shape every client can rely on. */
export interface ErrorBody {
  error: string;
  message: string;
  [extra: string]: unknown;
}
