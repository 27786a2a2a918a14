/** A pino-compatible logger: fields first, message second. */
export interface SandboxLogger {
  debug?(fields: Record<string, unknown>, message: string): void;
  warn(fields: Record<string, unknown>, message: string): void;
}

/** A sandbox as the backend describes it. Fields beyond `name` and `status` are backend-specific. */
export interface SandboxInfo {
  name: string;
  status?: string;
  [field: string]: unknown;
}

export interface CreateResult {
  sandbox: SandboxInfo;
  /** True when the sandbox already existed (409, or a 400 saying the name exists) and was adopted. */
  adopted: boolean;
}

/** One entry of `GET /v1/sandboxes/{name}/exec`. */
export interface ExecSessionInfo {
  id: string;
  command: string | string[];
  created: string | number;
  last_activity?: string | number | null;
  is_active: boolean;
  tty: boolean;
  [field: string]: unknown;
}

/** One NDJSON line of a checkpoint or restore stream. */
export interface StreamEvent {
  type: 'info' | 'stdout' | 'stderr' | 'error' | 'complete' | (string & {});
  data?: unknown;
  error?: unknown;
  [field: string]: unknown;
}

export interface NetworkRule {
  domain: string;
  action: 'allow' | 'deny';
  include?: string;
}

/** An empty rules list means allow-all (no enforcement). */
export interface NetworkPolicy {
  rules: NetworkRule[];
}
