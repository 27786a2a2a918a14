import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { parseConfig } from '../config/config.ts';
import { createLogger, resolveLogFormat } from './logger.ts';

function capture(): { stream: Writable; text: () => string } {
  let text = '';
  const stream = new Writable({
    write(chunk, _enc, done) {
      text += String(chunk);
      done();
    },
  });
  return { stream, text: () => text };
}

describe('log format', () => {
  it('is readable on a terminal outside production and JSON otherwise, unless LOG_FORMAT says', () => {
    assert.equal(parseConfig({}).config.logFormat, 'auto');
    assert.equal(parseConfig({ LOG_FORMAT: '  ' }).config.logFormat, 'auto');
    assert.equal(resolveLogFormat('auto', false, true), 'pretty');
    assert.equal(resolveLogFormat('auto', false, false), 'json');
    assert.equal(resolveLogFormat('auto', true, true), 'json');
    assert.equal(resolveLogFormat(parseConfig({ LOG_FORMAT: 'json' }).config.logFormat, false, true), 'json');
    assert.equal(
      resolveLogFormat(parseConfig({ LOG_FORMAT: 'pretty' }).config.logFormat, true, false),
      'pretty',
    );
  });

  it('writes one readable line per entry in pretty mode, still redacted', () => {
    const out = capture();
    const logger = createLogger({ level: 'info', format: 'pretty', destination: out.stream });
    logger.info({ req: { method: 'GET', url: '/auth/verify?token=s3cr3t-value' } }, 'request completed');
    const lines = out.text().trim().split('\n');
    assert.equal(lines.length, 1);
    assert.match(lines[0]!, /^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: request completed /);
    assert.doesNotMatch(out.text(), /s3cr3t-value/);
    assert.throws(() => JSON.parse(lines[0]!));
  });

  it('writes JSON lines in json mode', () => {
    const out = capture();
    createLogger({ level: 'info', format: 'json', destination: out.stream }).info({ n: 1 }, 'hello');
    const entry = JSON.parse(out.text()) as { level: string; msg: string; n: number };
    assert.equal(entry.level, 'info');
    assert.equal(entry.msg, 'hello');
  });
});
