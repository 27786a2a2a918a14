/**
 * The exec API: an exec's query parameters checked, its environment and argv built, its session started
 * and found again (exec/sessions.ts holds the sessions; runtime/namespaces.ts enters the sandbox).
 *
 * Invariants:
 * - An exec starts the sandbox first if it is not running, and only once its proxy listener is open
 *   (sandboxes.service.ts, `ready`).
 * - Env keys are what a POSIX shell can export and never start with sandboxd's own prefix; every value is
 *   inert data on the host side, applied inside the sandbox as the exec's user (runtime/host-tools.ts).
 * - What the kernel would refuse (E2BIG) answers 400 with the reason, never echoing a value.
 * - Every exec's environment sends its traffic to the sandbox's proxy (PROXY_PORT, network.ts) and puts the
 *   runtime layer first on PATH; the same environment is every file write's (sandboxes.service.ts).
 * Tests: test/exec.test.ts, test/egress.test.ts, test/layer.test.ts, test/rootless.test.ts (root execs).
 */
import path from 'node:path';
import { AppError } from './errors.ts';
import type { ExecSpec, Session, SessionTable } from './exec/sessions.ts';
import type { Logger } from './log.ts';
import { PROXY_PORT } from './network.ts';
import { SANDBOX_HOME } from './runtime/base.ts';
import {
  ENV_KEY_RE,
  ENV_RESERVED_PREFIX,
  execArgsLimit,
  execEnv,
  execTooLarge,
} from './runtime/host-tools.ts';
import type { ExecUser, InitHandle } from './runtime/namespaces.ts';

/** Linux's limit on an exec's argv and environment here (host-tools.ts). */
const EXEC_ARGS_LIMIT = execArgsLimit();

export interface ExecParams extends Omit<ExecSpec, 'argv' | 'env'> {
  cmd: string[];
  env: Record<string, string>;
  dir: string;
  /** `user=root`: uid 0 of the sandbox's user namespace (a sandboxd extension of the interface) */
  user: ExecUser;
}

/** What the exec API uses of a sandbox (the Sandbox of sandboxes.service.ts). */
export interface ExecSandbox {
  readonly sessions: SessionTable;
}

export interface ExecDeps<S extends ExecSandbox> {
  log: Logger;
  rootless: boolean;
  /** the argv that runs `cmd` in init `h`'s namespaces (runtime/namespaces.ts NamespaceRuntime) */
  execArgv(h: InitHandle, cmd: string[], dir: string, user: ExecUser): string[];
  /** `argv` joining the sandbox's cgroups first */
  cgroupArgv(sb: S, argv: string[]): string[];
  /** the sandbox root's CA bundle (runtime/base.ts), given to node as NODE_EXTRA_CA_CERTS */
  caBundle: string | null;
  /**
   * inside a sandbox: the runtime layer's bin directory, first on every exec's PATH (null: no layer); read for
   * every exec (a getter: the layer may be ready only after sandboxd started)
   */
  layerBin?: string | null;
  /** The tenant's sandbox; throws sandbox_not_found. */
  find(tenant: string, name: string): S;
  /** Starts the sandbox if needed and waits for its proxy listener; throws sandbox_unavailable. */
  ready(sb: S): Promise<InitHandle>;
}

export function createExecService<S extends ExecSandbox>(deps: ExecDeps<S>) {
  const { log } = deps;

  /** The environment of every exec of `user` (a file write's too, as the sandbox user), before its own env. */
  const defaultEnv = (tty: boolean, user: ExecUser): Record<string, string> => {
    const proxy = `http://127.0.0.1:${PROXY_PORT}`;
    const socks = `socks5h://127.0.0.1:${PROXY_PORT}`;
    const noProxy = 'localhost,127.0.0.1,::1';
    const system = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
    // The runtime layer (runtime/layer.ts) first: its node and the agent CLIs win over the system's.
    const layer = deps.layerBin ? `${deps.layerBin}:` : '';
    const who: Record<string, string> =
      user === 'root'
        ? {
            PATH: `${layer}${system}`,
            HOME: '/root',
            USER: 'root',
            LOGNAME: 'root',
            // Root installs system-wide: npm -g to node's own prefix, pip to /usr/local. With the layer, node
            // is the layer's (read-only), so npm -g goes to /usr/local instead.
            ...(layer ? { NPM_CONFIG_PREFIX: '/usr/local' } : {}),
          }
        : {
            PATH: `${layer}${SANDBOX_HOME}/.local/bin:${system}`,
            HOME: SANDBOX_HOME,
            USER: 'sandbox',
            LOGNAME: 'sandbox',
            // Global npm installs go to the sandbox user's own prefix (on PATH above).
            NPM_CONFIG_PREFIX: `${SANDBOX_HOME}/.local`,
          };
    return {
      ...who,
      SHELL: '/bin/bash',
      LANG: 'C.UTF-8',
      ...(tty ? { TERM: 'xterm-256color' } : {}),
      http_proxy: proxy,
      HTTP_PROXY: proxy,
      https_proxy: proxy,
      HTTPS_PROXY: proxy,
      all_proxy: socks,
      ALL_PROXY: socks,
      no_proxy: noProxy,
      NO_PROXY: noProxy,
      NODE_USE_ENV_PROXY: '1',
      // node does not read the system's CA store; every other client in the sandbox does.
      ...(deps.caBundle ? { NODE_EXTRA_CA_CERTS: deps.caBundle } : {}),
      // Debian marks the system Python as externally managed; user installs land in ~/.local.
      PIP_BREAK_SYSTEM_PACKAGES: '1',
      // Where the runtime layer is (its opencode plugin directory, docs/sandboxd.md "Runtime layer").
      ...(deps.layerBin ? { PADDOCK_RUNTIME_LAYER: path.posix.dirname(deps.layerBin) } : {}),
    };
  };

  return {
    defaultEnv,

    /** Parses exec query parameters; throws bad_request. */
    parseExec(query: URLSearchParams): ExecParams {
      const cmd = query.getAll('cmd');
      if (cmd.length === 0 || cmd[0] === '')
        throw new AppError('bad_request', 'cmd is required (repeat it once per argv entry)');
      const env: Record<string, string> = {};
      for (const kv of query.getAll('env')) {
        const i = kv.indexOf('=');
        if (i <= 0) throw new AppError('bad_request', 'env entries must be KEY=VALUE');
        const k = kv.slice(0, i);
        // What a POSIX shell can export (the loader inside the sandbox applies them); the prefix is its own.
        if (!ENV_KEY_RE.test(k) || k.startsWith(ENV_RESERVED_PREFIX)) {
          throw new AppError(
            'bad_request',
            `env key ${JSON.stringify(k.slice(0, 100))} must match [A-Za-z_][A-Za-z0-9_]* and not start with ${ENV_RESERVED_PREFIX}`,
          );
        }
        env[k] = kv.slice(i + 1);
      }
      const bool = (n: string, dflt: boolean) => {
        const v = query.get(n);
        if (v === null || v === '') return dflt;
        if (v === 'true' || v === '1') return true;
        if (v === 'false' || v === '0') return false;
        throw new AppError('bad_request', `${n} must be true or false`);
      };
      const int = (n: string, dflt: number) => {
        const v = query.get(n);
        if (v === null || v === '') return dflt;
        const x = Number(v);
        if (!Number.isInteger(x) || x < 1 || x > 9999)
          throw new AppError('bad_request', `${n} must be a positive integer`);
        return x;
      };
      const dirRaw = query.get('dir');
      const dir = dirRaw ? path.posix.resolve(SANDBOX_HOME, dirRaw) : SANDBOX_HOME;
      const tty = bool('tty', false);
      const userRaw = query.get('user');
      if (userRaw !== null && userRaw !== '' && userRaw !== 'root' && userRaw !== 'sandbox')
        throw new AppError('bad_request', 'user must be root or sandbox');
      return {
        user: userRaw === 'root' ? 'root' : 'sandbox',
        cmd,
        env,
        dir,
        command: cmd.join(' '),
        tty,
        stdin: bool('stdin', tty),
        rows: int('rows', 24),
        cols: int('cols', 80),
        detachable: bool('detachable', false),
      };
    },

    /** Starts an exec session (the sandbox is started first if needed). */
    async startExec(tenant: string, name: string, p: ExecParams): Promise<Session> {
      const sb = deps.find(tenant, name);
      const h = await deps.ready(sb);
      if (p.user === 'root' && deps.rootless && h.rootHolderPid === undefined)
        throw new AppError(
          'sandbox_unavailable',
          'this sandbox was started by an earlier sandboxd without a namespace for root execs; stop it and exec again',
        );
      const argv = deps.cgroupArgv(sb, deps.execArgv(h, p.cmd, p.dir, p.user));
      // Inert data on the host side; applied inside, as the exec's user (runtime/host-tools.ts).
      const env = execEnv({ ...defaultEnv(p.tty, p.user), ...p.env });
      // What the kernel would refuse (E2BIG) is the caller's error, said as such, not a failed start.
      const tooLarge = execTooLarge(argv, env, EXEC_ARGS_LIMIT, (k) => k.replace(/^SBX_ENV_V_/, ''));
      if (tooLarge) throw new AppError('bad_request', tooLarge);
      const session = sb.sessions.create(p);
      try {
        await session.start(argv, env);
      } catch (err) {
        sb.sessions.remove(session);
        throw err;
      }
      log.info('exec', {
        sandbox: name,
        session: session.id,
        command: p.command.slice(0, 200),
        tty: p.tty,
        detachable: p.detachable,
        ...(p.user === 'root' ? { user: 'root' } : {}),
      });
      return session;
    },

    findSession(tenant: string, name: string, id: string): Session {
      const s = deps.find(tenant, name).sessions.get(id);
      if (!s) throw new AppError('session_not_found', `session ${JSON.stringify(id)} not found`);
      return s;
    },

    listSessions(tenant: string, name: string) {
      return { sessions: deps.find(tenant, name).sessions.list() };
    },
  };
}
