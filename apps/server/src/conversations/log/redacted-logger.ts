// A logger for what a conversation's server and provisioner log: the fields that carry sandbox-
// or agent-derived text (`err`, `reason`) pass the conversation's redactor before the line is
// written (docs/secrets.md, "Redaction of output"). A failure's message can hold a secret the
// sandbox printed, a repository URL or a ref.
// What must hold: every string of an `err` (message, stack, causes, any field) or a `reason` is
// redacted with the registry as it is when the line is written, so values registered after the
// logger was made apply too. Test: test/conversations.failure-redaction.test.ts.
import pino from 'pino';
import type { Logger } from '../../observability/logger.ts';
import type { SecretRegistry } from './redactor.ts';

/** Deeper structures are cut: an error's fields are a few levels at most, and a cycle must end. */
const MAX_DEPTH = 8;

export function redactingLogger(logger: Logger, registry: Pick<SecretRegistry, 'redact'>): Logger {
  const deep = (value: unknown, depth: number): unknown => {
    if (typeof value === 'string') return registry.redact(value).toString('utf8');
    if (value === null || typeof value !== 'object') return value;
    if (depth >= MAX_DEPTH) return '[truncated]';
    if (Array.isArray(value)) return value.map((item) => deep(item, depth + 1));
    const copy: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value)) copy[key] = deep(item, depth + 1);
    return copy;
  };
  return logger.child(
    {},
    {
      serializers: {
        err: (err: unknown) => deep(err instanceof Error ? pino.stdSerializers.err(err) : err, 0),
        reason: (reason: unknown) => deep(reason, 0),
      },
    },
  );
}
