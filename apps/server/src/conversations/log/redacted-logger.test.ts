// The redacting logger: what a conversation's server and provisioner log passes its redactor.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { createLogger } from '../../observability/logger.ts';
import { redactingLogger } from './redacted-logger.ts';
import { createSecretRegistry, REDACTION_MARKER } from './redactor.ts';

function capture() {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  return { lines, logger: createLogger({ level: 'info', destination }) };
}

describe('redactingLogger', () => {
  it("redacts an error's message, stack, cause and fields, and a reason, with values registered later", () => {
    const { lines, logger } = capture();
    const registry = createSecretRegistry();
    const log = redactingLogger(logger.child({ conversationId: 'c1' }), registry);
    const secret = 'sk-live-Lg7Qm2Xv9Rt4';
    registry.register(secret); // after the logger was made: it still applies
    const err = Object.assign(
      new Error(`clone of https://git.test/${secret}.git failed`, { cause: new Error(secret) }),
      {
        detail: { output: [`fatal: ${secret}`] },
      },
    );
    log.warn({ err, stage: 'clone' }, 'provisioning stage failed');
    log.warn({ reason: `cloning at ${secret} failed` }, 'provisioning failed');
    log.warn({ err: `a string ${secret}` }, 'interrupt failed');
    const text = lines.join('');
    assert.equal(lines.length, 3);
    assert.ok(!text.includes(secret), text);
    assert.ok(!text.includes(Buffer.from(secret).toString('base64').slice(0, 12)), text);
    const [first, second, third] = lines.map((line) => JSON.parse(line));
    assert.equal(first.conversationId, 'c1');
    // pino joins the causes into the message.
    assert.equal(
      first.err.message,
      `clone of https://git.test/${REDACTION_MARKER}.git failed: ${REDACTION_MARKER}`,
    );
    assert.equal(first.err.type, 'Error');
    assert.match(first.err.stack, /redacted-logger\.test\.ts/);
    assert.deepEqual(first.err.detail, { output: [`fatal: ${REDACTION_MARKER}`] });
    assert.equal(second.reason, `cloning at ${REDACTION_MARKER} failed`);
    assert.equal(third.err, `a string ${REDACTION_MARKER}`);
  });
});
