// Runs a runtime adapter's TurnCommand on this machine, as the sandbox would: its files written
// (with /home/sandbox mapped to a temp home), its argv executed by the real `sh` with the CLI
// replaced by whatever `bin` holds (a stand-in that reports what it received). For the adapters'
// unit tests: the shell wrapper, stdin and the credential check are exercised for real.
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import type { AgentSnapshot, RuntimeAdapter, TurnCommand } from '../../src/conversations/contracts.ts';
import { HOME } from '../../src/conversations/turns/runtimes/common.ts';

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

export interface CommandSandbox {
  home: string;
  /** The host path of a sandbox path. */
  local(path: string): string;
  /** Puts an executable `name` on the PATH the command runs with. */
  stub(name: string, script: string): void;
  /** Writes the command's files and runs its argv with `env` (plus PATH and HOME). */
  run(cmd: TurnCommand, env?: Record<string, string>): Promise<RunResult>;
  read(path: string): string;
  mode(path: string): number;
  close(): void;
}

export function commandSandbox(): CommandSandbox {
  const home = mkdtempSync(join(os.tmpdir(), 'paddock-runtime-'));
  const bin = join(home, '.bin');
  mkdirSync(bin);
  const local = (path: string) => (path.startsWith(HOME) ? home + path.slice(HOME.length) : path);
  return {
    home,
    local,
    stub(name, script) {
      writeFileSync(join(bin, name), script);
      chmodSync(join(bin, name), 0o755);
    },
    async run(cmd, env = {}) {
      for (const file of cmd.files) {
        mkdirSync(dirname(local(file.path)), { recursive: true });
        writeFileSync(local(file.path), file.content, { mode: file.mode ?? 0o600 });
      }
      const started = performance.now();
      return await new Promise<RunResult>((resolve, reject) => {
        const child = spawn(cmd.argv[0] ?? 'sh', cmd.argv.slice(1).map(local), {
          cwd: local(cmd.cwd),
          env: { PATH: `${bin}:/usr/bin:/bin`, HOME: home, ...cmd.env, ...env },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        // Decoded once at the end: a chunk may end inside a multi-byte character.
        const out: Buffer[] = [];
        const err: Buffer[] = [];
        child.stdout.on('data', (d: Buffer) => out.push(d));
        child.stderr.on('data', (d: Buffer) => err.push(d));
        child.on('error', reject);
        child.on('close', (code) =>
          resolve({
            code,
            stdout: Buffer.concat(out).toString('utf8'),
            stderr: Buffer.concat(err).toString('utf8'),
            ms: performance.now() - started,
          }),
        );
      });
    },
    read: (path) => readFileSync(local(path), 'utf8'),
    mode: (path) => statSync(local(path)).mode & 0o777,
    close: () => rmSync(home, { recursive: true, force: true }),
  };
}

/** A stand-in CLI: prints its stdin, then each argument on its own line after a marker, to stdout. */
export const ECHO_CLI =
  '#!/bin/sh\ncat\nprintf "\\n--argv--\\n"\nfor a in "$@"; do printf "%s\\n" "$a"; done\n';

/** An agent of the adapter's runtime and a `buildTurn` with everything but what the test sets. */
export function adapterBuilder(adapter: RuntimeAdapter, model: string) {
  const agent = (over: Partial<AgentSnapshot> = {}): AgentSnapshot => ({
    id: 'a',
    name: 'a',
    runtime: adapter.runtime,
    model,
    system: null,
    skills: [],
    mcpServers: {},
    environmentId: null,
    ...over,
  });
  const build = (input: Partial<Parameters<RuntimeAdapter['buildTurn']>[0]> = {}): TurnCommand =>
    adapter.buildTurn({
      agent: agent(),
      prompt: 'hello',
      images: [],
      resumeSessionId: null,
      mcpServers: {},
      turnId: 't1',
      env: {},
      ...input,
    });
  return { agent, build };
}
