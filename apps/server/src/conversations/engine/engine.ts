// The engine of one server process: its conversation servers (one per conversation it owns),
// the command bus that routes commands to owners, the lifecycle clock and the boot sweep.
//
// What must hold:
// 1. At most one conversation server per conversation in this process, and only while this
//    process holds the conversation's lock (owner.ts). A server that ends releases the lock,
//    then the engine looks once more for a queued turn that arrived meanwhile (a command sent
//    while the lock was still held would otherwise be lost).
// 2. Losing the ownership connection stops every server at once, without writing (the locks
//    are gone; another process may already own them). While it is being re-opened (owner.ts
//    invariant 3a) the lifecycle clock skips its ticks: without the connection nothing can be
//    owned or adopted, and every query of a tick would fail and log.
// 2a. Every probe of the lifecycle clock first fences the nodes whose owner lease expired
//    (owner.ts invariant 7) and publishes `owner_lost` for their live conversations.
// 3. The boot sweep runs once per cluster at start-up (a cluster-wide advisory lock), adopting
//    conversations left by a process that died (test: the kill -9 test). The first replica to
//    start keeps the lock while it lives (it goes with its ownership connection): a replica that
//    starts beside a running one leaves orphans to the orphan probes, which every replica runs
//    every 2 s, so replicas booting together sweep once, not once each (test:
//    replicas.concurrent-boot.test.ts; it logs `boot sweep: …` once).
// 4. A delete tells the conversation's log viewers at once, in every process, also when no
//    server owns the conversation (an idle one). Test (conversations.stream-abort.test.ts): "a
//    viewer of a deleted idle conversation gets `end` at once, on another instance too".
import type { SandboxClient } from '@paddock/sandbox-client';
import { sql } from 'kysely';
import type { Db } from '../../db/database.ts';
import { type Command, createCommandBus, type EngineCommands } from './commands.ts';
import { type ConversationServer, createConversationServer, type ServerDeps } from './conversation-server.ts';
import { createLifecycleClock, type LifecycleOptions } from './lifecycle.ts';
import type { AcquiredLease, Ownership } from './owner.ts';

export interface ConversationEngine extends EngineCommands {
  /** LISTEN for commands, start the lifecycle clock and run the boot sweep. */
  start(): Promise<void>;
  /** Stops every server of this process (turns keep running in their sandboxes) and lets go. */
  stop(): Promise<void>;
  /** One lifecycle pass now. */
  tick(): Promise<void>;
}

export function createEngine(
  deps: ServerDeps & {
    pool: import('pg').Pool;
    ownership: Ownership;
    lifecycle: LifecycleOptions;
    sandbox: SandboxClient;
  },
): ConversationEngine {
  const { ownership, logger, db } = deps;
  const servers = new Map<string, ConversationServer>();
  let listening: Promise<void> | null = null;
  let stopping = false;

  const onEnd = (server: ConversationServer, crashed: boolean) => {
    const id = server.lease.conversationId;
    if (servers.get(id) !== server) return;
    servers.delete(id);
    void (async () => {
      await ownership.release(id);
      // After a crash the orphan sweep retries on its next tick instead (no tight loop); a
      // stopping process leaves the turn to the next owner.
      if (!crashed && !stopping && (await hasQueuedTurn(db, id)))
        await send({ type: 'prompt', tenantId: server.lease.tenantId, conversationId: id });
    })().catch((err: unknown) =>
      logger.warn({ err, conversationId: id }, 'release after a server ended failed'),
    );
  };

  const serverFor = (lease: AcquiredLease): ConversationServer => {
    const existing = servers.get(lease.conversationId);
    if (existing) return existing;
    const server = createConversationServer(deps, lease, onEnd, { agentId: lease.agentId });
    servers.set(lease.conversationId, server);
    return server;
  };

  const dispatch = async (server: ConversationServer, command: Command) => {
    switch (command.type) {
      case 'prompt':
        server.kick();
        return;
      case 'interrupt':
        await server.interrupt(command.turnId);
        return;
      case 'terminate':
        await server.terminate();
        return;
      case 'delete':
        await server.remove();
        return;
    }
  };

  const bus = createCommandBus({
    pool: deps.pool,
    ownership,
    logger,
    handler: {
      async handleOwned(command) {
        const server = servers.get(command.conversationId);
        if (server) await dispatch(server, command);
      },
      async handleAdopted(command, lease) {
        const server = serverFor(lease);
        // The status as the lease's bump read it (owner.ts invariant 6).
        if (command.type === 'prompt') {
          if (lease.status === 'terminated') {
            await server.terminate();
            return;
          }
        }
        await dispatch(server, command);
      },
    },
  });

  const listen = () => {
    listening ??= bus.start().catch((err: unknown) => {
      listening = null;
      throw err;
    });
    return listening;
  };

  const send = async (command: Command) => {
    // The row is gone (the request deleted it before sending): the viewers of the conversation,
    // in every process (the feed's NOTIFY), look now and end their streams, whether or not a
    // server owns it (invariant 4).
    if (command.type === 'delete')
      deps.feed.publish(command.conversationId, { type: 'status', status: 'deleted' });
    await listen();
    await bus.send(command);
  };

  ownership.onLost(() => {
    if (stopping) return;
    for (const server of [...servers.values()]) void server.stop({ lost: true });
    servers.clear();
    // The ownership re-opens its connection itself, with backoff, and LISTENs again on it
    // (owner.ts invariant 3a): commands are heard again once the database answers.
  });

  // Adoption only: a conversation another process owns is left alone, with no NOTIFY (the
  // orphan probe runs every few seconds on every process).
  const adopt = async (tenantId: string, conversationId: string) => {
    await listen();
    const held = ownership.holds(conversationId);
    if ((await bus.adopt({ type: 'prompt', tenantId, conversationId })) && !held)
      deps.metrics.ownerTakeovers.inc();
  };

  const clock = createLifecycleClock({
    db,
    logger,
    options: deps.lifecycle,
    servers: () => [...servers.values()],
    paused: () => listening !== null && !ownership.connected(),
    adopt,
    // Owner leases (owner.ts invariant 7): a hung owner's viewers, in every process, hear at
    // once that nobody owns its live conversations (stream.routes.ts invariant 3), before the
    // adoption that follows in the same probe.
    fenceExpired: () =>
      ownership.fenceExpired((fenced) => {
        for (const node of fenced)
          for (const c of node.conversations) deps.feed.publish(c.conversationId, { type: 'owner_lost' });
      }),
    retryDestroys: () => deps.destroys.retryDue(),
  });
  // Back after a loss: adopt the conversations that were stopped (their turns kept running in
  // the sandboxes, whose replay buffers are bounded) now rather than at the next tick.
  ownership.onRestored(() => {
    if (!stopping) void clock.tick();
  });

  return {
    send,
    adoptOrphan: adopt,

    async destroySandboxes(tenantId, names) {
      for (const name of names) await deps.destroys.destroy(tenantId, name);
    },

    async start() {
      await listen();
      clock.start();
      // Invariant 3: the lock is kept for as long as this process's ownership connection lives.
      if (await ownership.tryClusterLock('boot-sweep')) {
        logger.info('boot sweep: adopting the conversations of processes that died');
        await clock.tick();
      }
    },

    tick: () => clock.tick(),

    async stop() {
      stopping = true;
      await clock.stop();
      await Promise.all([...servers.values()].map((s) => s.stop().catch(() => {})));
      servers.clear();
      await ownership.close();
    },
  };
}

async function hasQueuedTurn(db: Db, conversationId: string): Promise<boolean> {
  const row = await db
    .selectFrom('turns')
    .select(sql<number>`1`.as('one'))
    .where('conversation_id', '=', conversationId)
    .where('status', 'in', ['queued', 'running'])
    .executeTakeFirst();
  return row !== undefined;
}
