import { setTimeout as sleep } from 'node:timers/promises';
import { SandboxApiError, SandboxTimeoutError, SandboxTransportError } from './errors.ts';

/**
 * Retries of the provisioning path (spec, outbound interface rule 8): a 5xx, a
 * 429, a timeout or a transport error is tried again, up to `attempts` in all,
 * with exponential backoff and jitter (each wait is drawn between half and all of
 * the exponential step). Every other failure (another 4xx, a
 * protocol error) is thrown at once. A 429 that names a wait
 * (`retry_after_seconds` in the body or `Retry-After`) waits at least that long.
 * A caller may narrow what is retried (`retryable`): a command's exec upgrade is not tried
 * again once it may have reached the backend (client.ts `connect`).
 */
export interface RetryPolicy {
  /** Attempts in all, first one included. Default 3. */
  attempts: number;
  /** Backoff before the second attempt; doubles each time. Default 250 ms. */
  baseDelayMs: number;
  /** Ceiling of one wait, also applied to a server-named wait. Default 10 s. */
  maxDelayMs: number;
}

export const defaultRetryPolicy: RetryPolicy = { attempts: 3, baseDelayMs: 250, maxDelayMs: 10_000 };

export function isRetryable(error: unknown): boolean {
  if (error instanceof SandboxApiError) return error.status >= 500 || error.status === 429;
  return error instanceof SandboxTimeoutError || error instanceof SandboxTransportError;
}

export function backoffDelayMs(policy: RetryPolicy, failedAttempt: number, error: unknown): number {
  const exponential = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (failedAttempt - 1));
  const jittered = exponential / 2 + Math.random() * (exponential / 2);
  const named = error instanceof SandboxApiError ? error.retryAfterSeconds : undefined;
  if (named === undefined) return jittered;
  return Math.min(policy.maxDelayMs, Math.max(jittered, named * 1000));
}

export interface RetryLogger {
  warn(fields: Record<string, unknown>, message: string): void;
}

export async function withRetry<T>(
  operation: string,
  policy: RetryPolicy,
  run: (attempt: number) => Promise<T>,
  logger?: RetryLogger,
  retryable: (error: unknown) => boolean = isRetryable,
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run(attempt);
    } catch (error) {
      if (attempt >= policy.attempts || !retryable(error)) throw error;
      const delayMs = backoffDelayMs(policy, attempt, error);
      logger?.warn(
        { operation, attempt, delayMs: Math.round(delayMs), error: (error as Error).message },
        'sandbox call failed, retrying',
      );
      await sleep(delayMs);
    }
  }
}
