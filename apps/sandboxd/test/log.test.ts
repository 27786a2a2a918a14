import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import { createLogger } from '../src/log.ts';

describe('sandboxd log lines', () => {
  it('are JSON by default and one readable line each in pretty mode', () => {
    const json = new PassThrough();
    createLogger('info', json).info('sandbox created', { id: 'a' });
    assert.deepEqual(Object.keys(JSON.parse(String(json.read()))), ['level', 'time', 'msg', 'id']);

    const pretty = new PassThrough();
    const log = createLogger('info', pretty, 'pretty');
    log.warn('exec failed', { id: 'a', err: new Error('gone') });
    log.debug('hidden');
    assert.match(
      String(pretty.read()),
      /^\[\d\d:\d\d:\d\d\.\d{3}\] WARN sandboxd: exec failed id=a err=\{"message":"gone"\}\n$/,
    );
  });
});
