// Commands (prompt, interrupt, terminate, delete) reach a conversation's owner whichever
// process receives the request.
//
// What must hold:
// 1. A command is a kick, not data: the request already wrote what it decided (the queued turn,
//    the `terminated` status) in its own transaction, and the owner acts on the rows. A command
//    delivered twice, or to a process that then finds nothing to do, is harmless.
// 2. Routing: this process owns the conversation → handle here; nobody owns it → take
//    ownership here and handle it (the "orphan" case after an owner died); someone else owns it
//    → NOTIFY on `paddock_conversation_commands`. A process receiving a NOTIFY applies the same
//    rule without re-sending, so a command that raced with its owner letting go is still
//    handled by whoever takes the conversation (test: "a prompt received by a process that is
//    not the owner runs on the owner", conversations.ownership.test.ts).
import type pg from 'pg';
import type { Logger } from '../../observability/logger.ts';
import type { AcquiredLease, Ownership } from './owner.ts';

export const COMMANDS_CHANNEL = 'paddock_conversation_commands';

export interface Command {
  type: 'prompt' | 'interrupt' | 'terminate' | 'delete';
  tenantId: string;
  conversationId: string;
  /** interrupt: the turn the request saw queued or running (a late command stops no other). */
  turnId?: string;
}

export interface CommandHandler {
  /** This process owns the conversation (a running server exists for it). */
  handleOwned(command: Command): Promise<void>;
  /** This process just took the conversation over: start its server, then handle. */
  handleAdopted(command: Command, lease: AcquiredLease): Promise<void>;
}

export interface CommandBus {
  start(): Promise<void>;
  send(command: Command): Promise<void>;
  /** Handles here when this process owns or can take the conversation; never NOTIFYs another owner. */
  adopt(command: Command): Promise<boolean>;
}

function parse(payload: string): Command | null {
  try {
    const c = JSON.parse(payload) as Partial<Command>;
    if (
      (c.type === 'prompt' || c.type === 'interrupt' || c.type === 'terminate' || c.type === 'delete') &&
      typeof c.tenantId === 'string' &&
      typeof c.conversationId === 'string'
    )
      return {
        type: c.type,
        tenantId: c.tenantId,
        conversationId: c.conversationId,
        ...(typeof c.turnId === 'string' ? { turnId: c.turnId } : {}),
      };
  } catch {
    // Not ours: ignored.
  }
  return null;
}

export function createCommandBus(deps: {
  pool: pg.Pool;
  ownership: Ownership;
  handler: CommandHandler;
  logger: Logger;
}): CommandBus {
  const { ownership, handler } = deps;

  /** Handles here when this process owns or can take the conversation; false when another process owns it. */
  const handleHere = async (command: Command): Promise<boolean> => {
    if (ownership.holds(command.conversationId)) {
      await handler.handleOwned(command);
      return true;
    }
    const lease = await ownership.tryAcquire(command.tenantId, command.conversationId);
    if (!lease) return false;
    await handler.handleAdopted(command, lease);
    return true;
  };

  return {
    async start() {
      await ownership.listen(COMMANDS_CHANNEL, (payload) => {
        const command = parse(payload);
        if (!command) return;
        handleHere(command).catch((err: unknown) =>
          deps.logger.error(
            { err, command: command.type, conversationId: command.conversationId },
            'command failed',
          ),
        );
      });
    },

    async send(command) {
      if (await handleHere(command)) return;
      await deps.pool.query('SELECT pg_notify($1, $2)', [COMMANDS_CHANNEL, JSON.stringify(command)]);
    },

    adopt: handleHere,
  };
}

/** What the service needs of the engine: route a command to the owner; destroy backend sandboxes. */
export interface EngineCommands {
  send(command: Command): Promise<void>;
  /** Takes the conversation over when no process owns it (its owner died); nothing otherwise. */
  adoptOrphan(tenantId: string, conversationId: string): Promise<void>;
  /** Destroys the backend sandboxes; a destroy the backend does not confirm is retried (provisioning/destroy-queue.ts). */
  destroySandboxes(tenantId: string, names: string[]): Promise<void>;
}
