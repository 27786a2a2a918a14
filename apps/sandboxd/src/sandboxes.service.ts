/**
 * Sandbox lifecycle: create, list, start, stop, destroy, and the sandboxes an earlier sandboxd left adopted
 * (load); the sandbox map and the per-sandbox locks. Its parts, beside it, own one concern each and know a
 * sandbox only by the interface they declare: storage.ts (id slots, the writable layer, the disk image),
 * network.ts (the egress proxy, its listener, the network policy), exec.service.ts and files.service.ts
 * (the exec and files APIs), checkpoints.service.ts.
 *
 * State on disk (survives a sandboxd restart):
 *   <data>/tenants/<tenant>/sandboxes/<name>/sandbox.json   record: name, created_at, policy, init pid, id slot
 *   <data>/tenants/<tenant>/sandboxes/<name>/layer/, work/ or disk.img   the writable layer, see storage.ts
 *   <data>/tenants/<tenant>/checkpoints/<id>/   see checkpoints.service.ts
 * A tenant is the keyed hash of the bearer token (tenants.ts): names are unique per token.
 *
 * Invariants:
 * - Lifecycle operations of one sandbox (create, start, stop, restore, checkpoint, destroy) run one at a time
 *   (per-sandbox lock); exec and writes wait for the sandbox to be running.
 * - An exec starts only once the sandbox's proxy listener is open (a process may connect to it at once). A
 *   file write, a restore's answer and a checkpoint's need only the init: the listener, opened by a helper
 *   process (namespaces.ts listenHelper: 10-15 ms more here), may still be on its way (`listening`); it
 *   becomes the sandbox's only while the init it was opened for runs, and is closed otherwise (network.ts).
 *   A listener that failed to open is opened again by the next exec.
 * - create answers once the sandbox record is durable (fsync'ed); everything else (writable layer, cgroup,
 *   namespaces and mounts, proxy listener) is set up in the background after the response, reported as
 *   status "starting". A failed setup is reported as status "failed" with its error; exec and writes try
 *   to start the sandbox again and answer 503 sandbox_unavailable with the reason if that fails too.
 * - A running sandbox whose init died (OOM, host reboot, sandboxd restart with a dead init) is started
 *   again on demand over the same writable layer.
 * - A destroy interrupted by a crash is finished by the next sandboxd, never undone: the record says
 *   `destroying` (durably) before anything is torn down, and it is removed last. A restarted sandboxd also
 *   kills every init of its data dir that no record claims (one spawned right before a crash, before it
 *   was recorded). Test: test/crash-recovery.test.ts.
 * Test of the others: test/lifecycle.test.ts (create, "starting" and "failed", a restart, a dead init).
 */
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import type net from 'node:net';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { createCheckpointsService } from './checkpoints.service.ts';
import type { SandboxdOptions } from './config.ts';
import { AppError } from './errors.ts';
import { FileWriter, type WriteChain } from './exec/file-writer.ts';
import { FifoPool } from './exec/procs.ts';
import { SessionTable } from './exec/sessions.ts';
import { ShimPool } from './exec/shim-pool.ts';
import { createExecService } from './exec.service.ts';
import { createFilesService } from './files.service.ts';
import type { Logger } from './log.ts';
import { createNetwork } from './network.ts';
import type { PolicyRule } from './proxy/policy.ts';
import type { EgressProxy } from './proxy/proxy.ts';
import type { IdMap } from './runtime/base.ts';
import type { Cgroups, SandboxCgroup } from './runtime/cgroups.ts';
import type { Disks } from './runtime/disks.ts';
import { execEnv, type HostTools } from './runtime/host-tools.ts';
import {
  cgroupWrap,
  FIFO_FD,
  holderAlive,
  type InitHandle,
  initsUnder,
  isAlive,
  type NamespaceRuntime,
  RUN_BYTES,
  SHM_BYTES,
} from './runtime/namespaces.ts';
import { removeTree, writeJsonAtomic } from './state-files.ts';
import { createStorage } from './storage.ts';

export const PAGE_SIZE = 50;
const NAME_RE = /^[a-zA-Z0-9][a-zA-Z0-9._-]{0,62}$/;

interface SandboxRecord {
  name: string;
  created_at: string;
  policy: PolicyRule[];
  init: InitHandle | null;
  /** "image": the writable layer is on the sandbox's own disk image (runtime/disks.ts); absent: a directory. */
  disk?: 'image';
  /** host id slot (root mode: the sandbox's own uid/gid range); absent in records of earlier versions */
  slot?: number;
  /** set (durably) when its destroy starts: a sandboxd that finds it finishes the destroy */
  destroying?: true;
}

class Sandbox {
  rec: SandboxRecord;
  readonly tenant: string;
  readonly dir: string;
  /** Starts scheduled or running (status "starting"). */
  starting = 0;
  /** Why the last start failed (status "failed"); cleared by a successful start. */
  setupError: string | null = null;
  cgroup: SandboxCgroup | null = null;
  listener: net.Server | null = null;
  /** The proxy listener being opened for the running init (settles into `listener`), or null. */
  listening: Promise<net.Server> | null = null;
  readonly proxy: EgressProxy;
  readonly sessions: SessionTable;
  readonly fifos: FifoPool;
  readonly writer: FileWriter;
  private chain: Promise<unknown> = Promise.resolve();
  destroyed = false;

  constructor(
    rec: SandboxRecord,
    tenant: string,
    dir: string,
    proxy: EgressProxy,
    sessions: { bufferBytes: number; fifos: FifoPool; shims: ShimPool; log: Logger },
    writeChain: WriteChain,
  ) {
    this.rec = rec;
    this.tenant = tenant;
    this.dir = dir;
    this.proxy = proxy;
    this.fifos = sessions.fifos;
    this.sessions = new SessionTable({ ...sessions, dir: path.join(dir, 'sessions') });
    this.writer = new FileWriter(writeChain, () => {
      const h = this.rec.init;
      return h && !this.destroyed && isAlive(h) ? h : null;
    });
  }

  /** Runs fn after every earlier lifecycle operation of this sandbox finished. */
  locked<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.chain.then(fn, fn);
    this.chain = next.catch(() => {});
    return next;
  }

  /** Where the writable layer and the overlay work dirs live: the mounted disk image, or the sandbox dir. */
  get storage(): string {
    return this.rec.disk === 'image' ? path.join(this.dir, 'disk') : this.dir;
  }
  get layer(): string {
    return path.join(this.storage, 'layer');
  }
  get work(): string {
    return path.join(this.storage, 'work');
  }
}

export interface ServiceDeps {
  opts: SandboxdOptions;
  log: Logger;
  cgroups: Cgroups;
  runtime: NamespaceRuntime;
  /** the host ids of a sandbox slot (runtime/base.ts sandboxIds) */
  idsFor(slot: number): IdMap;
  tools: HostTools;
  hostDirs: string[];
  /** the sandbox root's CA bundle (runtime/base.ts), given to node as NODE_EXTRA_CA_CERTS */
  caBundle: string | null;
  disks: Disks;
  /** inside a sandbox: the runtime layer's bin directory, first on every exec's PATH (null: no layer) */
  layerBin?: string | null;
}

/** writeJsonAtomic that survives a power loss too: file, rename and directory entries fsync'ed. */
async function writeJsonDurable(file: string, value: unknown, alsoSync: string[] = []): Promise<void> {
  const tmp = `${file}.tmp-${process.pid}`;
  const fh = await fs.open(tmp, 'w');
  try {
    await fh.writeFile(`${JSON.stringify(value, null, 2)}\n`);
    await fh.datasync();
  } finally {
    await fh.close();
  }
  await fs.rename(tmp, file);
  for (const dir of [path.dirname(file), ...alsoSync]) {
    const dh = await fs.open(dir, 'r');
    try {
      await dh.sync();
    } finally {
      await dh.close();
    }
  }
}

function errorMessage(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).slice(0, 2000);
}

export function createSandboxesService(deps: ServiceDeps) {
  const { opts, log, cgroups, runtime, tools, disks } = deps;
  const sandboxes = new Map<string, Sandbox>();
  const tenantsDir = path.join(opts.dataDir, 'tenants');
  const key = (tenant: string, name: string) => `${tenant}/${name}`;
  const cgroupKey = (sb: Sandbox) => `${sb.tenant}-${sb.rec.name}`;
  // FIFOs of earlier versions lived here; now each sandbox's live in its init (exec/procs.ts FifoPool).
  rmSync(path.join(opts.dataDir, 'fifos'), { recursive: true, force: true });
  /** Pre-started session shims for every sandbox's detachable execs (exec/shim-pool.ts). */
  const shims = new ShimPool({
    compileCache: path.join(opts.dataDir, 'compile-cache'),
    log,
    // Raising a shim's priority again when it is taken needs root.
    lowPriority: !runtime.opts.rootless && process.getuid?.() === 0,
  });
  const storage = createStorage({
    log,
    rootless: runtime.opts.rootless,
    disks,
    hostDirs: deps.hostDirs,
    idsFor: deps.idsFor,
    slotsHeld: function* () {
      for (const sb of sandboxes.values()) if (sb.rec.slot !== undefined) yield sb.rec.slot;
    },
  });
  const network = createNetwork<Sandbox>({
    opts,
    log,
    listenHelperArgv: (pid) => runtime.listenHelperArgv(pid),
    find,
    persist,
  });
  const { openListener, closeListener, adoptListener } = network;
  const files = createFilesService<Sandbox>({ find, ready });
  const exec = createExecService<Sandbox>({
    log,
    rootless: runtime.opts.rootless,
    execArgv: (h, cmd, dir, user) => runtime.execArgv(h, cmd, dir, user),
    cgroupArgv,
    caBundle: deps.caBundle,
    // Read for every exec: the layer goes on PATH once it is ready (index.ts).
    get layerBin() {
      return deps.layerBin;
    },
    find,
    ready,
  });
  const checkpoints = createCheckpointsService<Sandbox>({
    tenantsDir,
    log,
    rootless: runtime.opts.rootless,
    tools,
    disks,
    checkpointsMax: opts.checkpointsMax,
    find,
    prepareStorage: storage.prepareStorage,
    adopt: (sb) => storage.remapIds(path.join(sb.layer, 'root'), storage.idsOf(sb)),
    persist,
    stop: stopLocked,
    // A restore or a checkpoint answers once the init runs; the next exec waits for the listener.
    start: (sb) => startLocked(sb, false),
  });

  function newSandbox(rec: SandboxRecord, tenant: string): Sandbox {
    const dir = path.join(tenantsDir, tenant, 'sandboxes', rec.name);
    const proxy = network.proxyFor(rec.name, rec.policy);
    const sb: Sandbox = new Sandbox(
      rec,
      tenant,
      dir,
      proxy,
      { bufferBytes: opts.sessionBufferBytes, fifos: new FifoPool(tools.mkfifo), shims, log },
      {
        argv: (h, cmd) => cgroupArgv(sb, runtime.execArgv(h, cmd, '/')),
        env: () => execEnv(exec.defaultEnv(false, 'sandbox')),
      },
    );
    return sb;
  }

  function persist(sb: Sandbox): void {
    writeJsonAtomic(path.join(sb.dir, 'sandbox.json'), sb.rec);
  }

  function find(tenant: string, name: string): Sandbox {
    const sb = sandboxes.get(key(tenant, name));
    if (!sb || sb.destroyed)
      throw new AppError('sandbox_not_found', `sandbox ${JSON.stringify(name)} not found`);
    return sb;
  }

  function status(sb: Sandbox): 'starting' | 'failed' | 'running' | 'stopped' {
    if (sb.starting > 0) return 'starting';
    if (sb.setupError !== null) return 'failed';
    return sb.rec.init !== null && isAlive(sb.rec.init) ? 'running' : 'stopped';
  }

  function view(sb: Sandbox) {
    const st = status(sb);
    return {
      name: sb.rec.name,
      status: st,
      ...(st === 'failed' ? { error: sb.setupError } : {}),
      created_at: sb.rec.created_at,
      limits: {
        cgroup: cgroups.mode === 'none' ? null : cgroups.mode,
        memory_bytes: cgroups.enforced.memory && opts.limits.memoryBytes > 0 ? opts.limits.memoryBytes : null,
        pids_max: cgroups.enforced.pids && opts.limits.pidsMax > 0 ? opts.limits.pidsMax : null,
        cpus: cgroups.enforced.cpu && opts.limits.cpus > 0 ? opts.limits.cpus : null,
        disk_bytes: sb.rec.disk === 'image' ? disks.bytes || null : null,
        shm_bytes: SHM_BYTES,
        run_bytes: RUN_BYTES,
      },
      network_policy: { rules: sb.rec.policy },
    };
  }

  /**
   * Starts (or adopts) the sandbox's init and proxy listener. Must run under the sandbox lock.
   * Reports "starting" meanwhile and records a failure for status "failed".
   */
  async function startLocked(sb: Sandbox, needListener = true): Promise<InitHandle> {
    sb.starting++;
    try {
      const h = await startNow(sb, needListener);
      sb.setupError = null;
      return h;
    } catch (err) {
      if (!sb.destroyed) sb.setupError = errorMessage(err);
      throw err;
    } finally {
      sb.starting--;
    }
  }

  /** Starts the init when it is not running; waits for the proxy listener only with `needListener`. */
  async function startNow(sb: Sandbox, needListener: boolean): Promise<InitHandle> {
    if (sb.destroyed)
      throw new AppError('sandbox_not_found', `sandbox ${JSON.stringify(sb.rec.name)} not found`);
    if (!sb.cgroup) sb.cgroup = cgroups.create(cgroupKey(sb));
    if (sb.rec.init && isAlive(sb.rec.init) && !holderAlive(sb.rec.init)) {
      // Rootless: the sandbox user has the holder's host uid and killed it; no exec can enter any more.
      log.warn('sandbox user namespace holder is gone; restarting the sandbox', { sandbox: sb.rec.name });
      await stopLocked(sb);
    }
    let h = sb.rec.init;
    if (!h || !isAlive(h)) {
      closeListener(sb);
      await storage.prepareStorage(sb);
      const ids = storage.idsOf(sb);
      const t0 = performance.now();
      // The proxy listener is opened while the init mounts the filesystem (its network namespace is ready
      // first); the sandbox is running once both are.
      const early: { listener?: Promise<net.Server> } = {};
      try {
        h = await runtime.start(
          { layer: sb.layer, work: sb.work, merged: path.join(sb.dir, 'merged'), state: sb.dir },
          sb.cgroup?.procsFiles ?? [],
          ids,
          (pid) => {
            early.listener = openListener(sb, pid);
            early.listener.catch(() => {}); // awaited below
          },
        );
      } catch (err) {
        void early.listener?.then(
          (server) => server.close(),
          () => {},
        );
        throw err;
      }
      for (const pid of [h.pid, h.holderPid]) {
        try {
          writeFileSync(`/proc/${pid}/oom_score_adj`, '-1000');
        } catch {}
      }
      sb.rec.init = h;
      persist(sb);
      if (early.listener) adoptListener(sb, h, early.listener);
      log.info('sandbox started', { sandbox: sb.rec.name, ms: Math.round(performance.now() - t0) });
      if (h.idmapOff)
        log.warn('system directories are read-only in this sandbox: idmapped mounts failed', {
          sandbox: sb.rec.name,
          reason: h.idmapOff,
        });
    }
    // The next file writes' chains start now, while the proxy listener may still be opening (10–40 ms here)
    // and the caller's next request is on its way: a restore's caller writes its files right after the
    // answer (docs/performance.md, tenth pass). Kept when this init has them already.
    sb.writer.started();
    if (!sb.listener) {
      const opening = sb.listening ?? adoptListener(sb, h, openListener(sb, h.pid));
      if (needListener) await opening;
    }
    sb.fifos.use(`/proc/${h.pid}/fd/${FIFO_FD}`);
    return h;
  }

  async function ensureRunning(sb: Sandbox, needListener = true): Promise<InitHandle> {
    const h = sb.rec.init;
    if (h && isAlive(h) && holderAlive(h)) {
      if (sb.listener || !needListener) return h;
      // Still opening (a start that did not wait for it): an exec waits for it, not for the sandbox lock.
      const opened = await sb.listening?.then(
        () => true,
        () => false,
      );
      if (opened && sb.rec.init === h) return h;
    }
    return sb.locked(() => startLocked(sb, needListener));
  }

  /**
   * Background setups of created sandboxes, at most one per CPU at a time: each costs tens of ms of CPU
   * (processes, mounts, a node helper), and a burst of creates must not starve request handling (measured
   * on 2 cores: unbounded, creates in a burst took 45-65 ms; one at a time, the backlog slowed the execs
   * that followed by 2x). An exec or write that needs
   * its sandbox does not wait for its turn: it starts it at once (ensureRunning); the queue then finds it
   * running. Each queued sandbox counts in sb.starting until its turn is over.
   */
  const setupQueue: Sandbox[] = [];
  /**
   * How long a created sandbox waits before its background setup starts. A checkpoint restore right after
   * the create (a warm start) then finds it not started: otherwise it waits for the whole start (~130 ms
   * here) under the sandbox lock, only to stop the sandbox and start it again on the restored files. An exec
   * or a write does not wait for this (ensureRunning starts the sandbox at once).
   */
  const SETUP_DELAY_MS = 50;
  const setupWorkers = availableParallelism();
  let setupsRunning = 0;
  function drainSetups(): void {
    while (setupsRunning < setupWorkers && setupQueue.length > 0) {
      const sb = setupQueue.shift()!;
      setupsRunning++;
      void (sb.destroyed ? Promise.resolve() : ensureRunning(sb))
        .catch((err: unknown) => {
          if (!sb.destroyed) log.warn('sandbox setup failed', { sandbox: sb.rec.name, err });
        })
        .finally(() => {
          sb.starting--;
          setupsRunning--;
          drainSetups();
        });
    }
  }

  /** ensureRunning for exec and writes: a sandbox that cannot be started answers a clear 503. */
  async function ready(sb: Sandbox, needListener = true): Promise<InitHandle> {
    try {
      return await ensureRunning(sb, needListener);
    } catch (err) {
      if (err instanceof AppError) throw err;
      throw new AppError(
        'sandbox_unavailable',
        `sandbox ${JSON.stringify(sb.rec.name)} could not be started: ${errorMessage(err)}`,
      );
    }
  }

  /**
   * Removes everything of a sandbox whose record says `destroying`: sessions, init, disk image, cgroup,
   * files; the record last, so a crash on the way leaves a record the next sandboxd finishes from.
   */
  async function tearDown(sb: Sandbox): Promise<void> {
    try {
      await stopLocked(sb);
      if (sb.rec.disk === 'image') await disks.unmount(sb.dir);
      sb.cgroup?.remove();
      if (!sb.cgroup) cgroups.create(cgroupKey(sb))?.remove();
      let entries: string[] = [];
      try {
        entries = readdirSync(sb.dir);
      } catch {}
      for (const e of entries) if (e !== 'sandbox.json') await removeTree(path.join(sb.dir, e), tools.chmod);
      await removeTree(sb.dir, tools.chmod);
    } finally {
      if (sb.rec.slot !== undefined) storage.releaseSlot(sb.rec.slot);
    }
  }

  async function stopLocked(sb: Sandbox): Promise<void> {
    sb.writer.drop();
    await sb.sessions.clear();
    closeListener(sb);
    if (sb.rec.init) await runtime.stop(sb.rec.init);
    sb.rec.init = null;
    if (!sb.destroyed) persist(sb);
  }

  return {
    async load(): Promise<void> {
      const unfinished: Sandbox[] = [];
      let tenants: string[] = [];
      try {
        tenants = readdirSync(tenantsDir);
      } catch {}
      for (const tenant of tenants) {
        let names: string[] = [];
        try {
          names = readdirSync(path.join(tenantsDir, tenant, 'sandboxes'));
        } catch {}
        for (const name of names) {
          try {
            const rec = JSON.parse(
              readFileSync(path.join(tenantsDir, tenant, 'sandboxes', name, 'sandbox.json'), 'utf8'),
            ) as SandboxRecord;
            const sb = newSandbox(rec, tenant);
            if (rec.destroying) {
              // A destroy a crash interrupted: finish it (the sandbox is gone for callers already).
              sb.destroyed = true;
              if (rec.slot !== undefined) storage.holdSlot(rec.slot);
              unfinished.push(sb);
              continue;
            }
            sandboxes.set(key(tenant, name), sb);
            // Detachable exec sessions outlive sandboxd under their shims (exec/sessions.ts).
            sb.sessions.load();
            if (rec.init && isAlive(rec.init)) {
              // Adopt the running init: its processes keep running; only the proxy listener is reopened.
              void ensureRunning(sb).catch((err) => log.warn('cannot adopt sandbox', { sandbox: name, err }));
            } else if (rec.init) {
              rec.init = null;
              persist(sb);
            }
          } catch (err) {
            log.warn('skipping unreadable sandbox record', { tenant, name, err });
          }
        }
      }
      // Inits no record claims (spawned right before a crash, before they were recorded), and those of the
      // destroys being finished: killed, their sandbox is not running for anyone.
      const claimed = new Set<string>();
      for (const sb of sandboxes.values())
        if (sb.rec.init && isAlive(sb.rec.init)) claimed.add(`${sb.rec.init.pid}:${sb.rec.init.startTime}`);
      for (const found of initsUnder(tenantsDir)) {
        if (found.procs.some((p) => claimed.has(`${p.pid}:${p.startTime}`))) continue;
        log.warn('killing a sandbox init no record claims', {
          sandbox: path.basename(found.sandboxDir),
          pids: found.procs.map((p) => p.pid),
        });
        for (const p of found.procs) {
          try {
            process.kill(p.pid, 'SIGKILL');
          } catch {}
        }
      }
      for (const sb of unfinished)
        void tearDown(sb).then(
          () => log.info('finished an interrupted sandbox destroy', { sandbox: sb.rec.name }),
          (err: unknown) =>
            log.warn('cannot finish an interrupted sandbox destroy', { sandbox: sb.rec.name, err }),
        );
      log.info('state loaded', { sandboxes: sandboxes.size });
    },

    async create(tenant: string, body: unknown) {
      const name = (body as { name?: unknown } | null)?.name;
      if (typeof name !== 'string' || !NAME_RE.test(name)) {
        throw new AppError('bad_request', 'name must match [a-zA-Z0-9][a-zA-Z0-9._-]{0,62}');
      }
      if (sandboxes.has(key(tenant, name)))
        throw new AppError('sandbox_exists', `sandbox ${JSON.stringify(name)} already exists`);
      const rec: SandboxRecord = {
        name,
        created_at: new Date().toISOString(),
        policy: [],
        init: null,
        slot: storage.freeSlot(),
        ...(disks.enabled ? { disk: 'image' as const } : {}),
      };
      const sb = newSandbox(rec, tenant);
      sandboxes.set(key(tenant, name), sb);
      sb.starting++; // until its background setup (below) has run
      try {
        // Only the record is on the response path; a sandboxd restart finds it and sets the rest up.
        await sb.locked(async () => {
          await fs.mkdir(sb.dir, { recursive: true });
          await writeJsonDurable(path.join(sb.dir, 'sandbox.json'), sb.rec, [path.dirname(sb.dir)]);
        });
      } catch (err) {
        sb.starting--;
        if (sandboxes.get(key(tenant, name)) === sb) sandboxes.delete(key(tenant, name));
        rmSync(sb.dir, { recursive: true, force: true });
        throw err;
      }
      setupQueue.push(sb);
      // Not before the response is out (spawning from here would delay it), and not at once: a restore
      // that follows the create finds the sandbox not started yet and need not wait for a start it would
      // undo (SETUP_DELAY_MS).
      setTimeout(drainSetups, SETUP_DELAY_MS).unref();
      return view(sb);
    },

    get(tenant: string, name: string) {
      return view(find(tenant, name));
    },

    list(tenant: string, continuation: string | undefined) {
      let after = '';
      if (continuation) {
        after = Buffer.from(continuation, 'base64url').toString('utf8');
        if (!NAME_RE.test(after)) throw new AppError('bad_request', 'invalid continuation_token');
      }
      const names = [...sandboxes.values()]
        .filter((sb) => sb.tenant === tenant && !sb.destroyed)
        .map((sb) => sb.rec.name)
        .sort()
        .filter((n) => n > after);
      const page = names.slice(0, PAGE_SIZE);
      const hasMore = names.length > PAGE_SIZE;
      return {
        sandboxes: page.map((n) => view(sandboxes.get(key(tenant, n))!)),
        has_more: hasMore,
        next_continuation_token: hasMore ? Buffer.from(page[page.length - 1]!).toString('base64url') : null,
      };
    },

    async destroy(tenant: string, name: string): Promise<void> {
      const sb = find(tenant, name);
      await sb.locked(async () => {
        sb.destroyed = true;
        sandboxes.delete(key(tenant, name));
        // Its ids stay taken until nothing of it is left.
        if (sb.rec.slot !== undefined) storage.holdSlot(sb.rec.slot);
        sb.rec.destroying = true;
        // Best effort: without the mark a crash mid-way is what it was before (the sandbox comes back).
        await writeJsonDurable(path.join(sb.dir, 'sandbox.json'), sb.rec, []).catch((err: unknown) =>
          log.warn('cannot mark the sandbox record as destroying', { sandbox: name, err }),
        );
        await tearDown(sb);
      });
      log.info('sandbox destroyed', { sandbox: name });
    },

    parseExec: exec.parseExec,
    startExec: exec.startExec,
    findSession: exec.findSession,
    listSessions: exec.listSessions,

    assertExists(tenant: string, name: string): void {
      find(tenant, name);
    },

    writeFile: files.writeFile,

    setPolicy: network.setPolicy,
    getPolicy: network.getPolicy,

    listCheckpoints: checkpoints.list,
    checkpoint: checkpoints.create,
    assertCheckpoint: checkpoints.assertExists,
    restore: checkpoints.restore,
    deleteCheckpoint: checkpoints.delete,

    /** Stops sandboxd's side (listeners, sessions); sandbox inits keep running. */
    shutdown(): void {
      shims.close();
      for (const sb of sandboxes.values()) {
        sb.sessions.detachAll();
        sb.writer.drop();
        closeListener(sb);
      }
    },
  };

  function cgroupArgv(sb: Sandbox, argv: string[]): string[] {
    const files = sb.cgroup?.procsFiles ?? [];
    return files.length === 0 ? argv : cgroupWrap(tools.sh, files, argv);
  }
}

export type SandboxesService = ReturnType<typeof createSandboxesService>;
