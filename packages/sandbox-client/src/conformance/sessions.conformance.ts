import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { SandboxApiError } from '../errors.ts';
import type { ExecSessionInfo } from '../types.ts';
import type { ConformanceContext } from './context.ts';
import { until } from './exec.conformance.ts';

/**
 * The agent turn runs as a detachable exec: it must outlive the socket, be
 * listed, and replay its whole output on attach before tailing (the service
 * de-duplicates the replayed head by byte count, rule 4).
 */
export function registerSessionTests(ctx: () => ConformanceContext): void {
  describe('detachable sessions', () => {
    let name = '';
    before(async () => {
      name = await ctx().create('sessions');
    });
    after(async () => {
      if (name) await ctx().client.destroy(name);
    });

    it('keeps running when the socket drops, is listed, and replays from the start then tails on attach', async () => {
      const { client } = ctx();
      // Output before the drop, output while detached, then output gated on a file created after attaching.
      const script =
        'echo start; echo start-err >&2; sleep 1; echo while-detached; ' +
        'while [ ! -f /tmp/conformance-go ]; do sleep 0.05; done; echo end; exit 4';
      let firstOutput = '';
      const handle = await client.execStream(name, {
        cmd: ['sh', '-c', script],
        detachable: true,
        onStdout: (chunk) => {
          firstOutput += chunk.toString();
        },
      });
      await until(() => firstOutput.includes('start\n'), 'the first line arrives');
      handle.close();
      assert.equal(await handle.exited, 0, 'dropping the socket is a close without an exit frame');

      // Still running while nobody is attached, and listed as inactive (rule 3).
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      const sessions = await client.listSessions(name);
      const session: ExecSessionInfo | undefined = handle.sessionId
        ? sessions.find((candidate) => candidate.id === handle.sessionId)
        : sessions.find((candidate) => JSON.stringify(candidate.command).includes('while-detached'));
      assert.ok(session, `the detached session is listed: ${JSON.stringify(sessions)}`);
      for (const field of ['id', 'command', 'created', 'last_activity', 'is_active', 'tty']) {
        assert.ok(field in session, `a session has \`${field}\``);
      }
      assert.equal(session.tty, false);
      assert.equal(session.is_active, false, 'no one is attached');

      let stdout = '';
      let stderr = '';
      const attached = await client.attach(name, session.id, {
        onStdout: (chunk) => {
          stdout += chunk.toString();
        },
        onStderr: (chunk) => {
          stderr += chunk.toString();
        },
      });
      await until(() => stdout.includes('while-detached\n'), 'the replay reaches output made while detached');
      assert.ok(
        stdout.startsWith('start\n'),
        `the replay starts from the beginning: ${JSON.stringify(stdout)}`,
      );
      const listedWhileAttached = await client.listSessions(name);
      assert.equal(listedWhileAttached.find((candidate) => candidate.id === session.id)?.is_active, true);

      const go = await client.exec(name, { cmd: ['touch', '/tmp/conformance-go'] });
      assert.equal(go.exitCode, 0);
      const code = await attached.exited;
      assert.equal(stdout, 'start\nwhile-detached\nend\n', 'replay then tail, each byte once');
      assert.equal(stderr, 'start-err\n');
      assert.equal(code, 4);
    });

    it('answers an attach to an unknown session with 404', async () => {
      const error = await ctx()
        .client.attach(name, 'no-such-session')
        .catch((caught: unknown) => caught);
      assert.ok(error instanceof SandboxApiError, `expected an API error, got ${String(error)}`);
      assert.equal(error.status, 404);
    });
  });
}
