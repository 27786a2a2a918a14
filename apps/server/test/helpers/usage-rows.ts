// A sandbox lifetime with one turn, written as rows and ended with plain UPDATEs as the service
// ends them, so the meter's triggers (migration 0029) write its usage events: for the CLI and
// console tests of the usage views.
import { v7 as uuidv7 } from 'uuid';
import type { Db } from '../../src/db/database.ts';
import { insertConversation, insertTurn } from './conversation-rows.ts';

export interface SandboxLife {
  /** When the sandbox became ready (it starts then too). */
  ready: Date;
  /** How long it stayed ready. */
  hours: number;
  /** How long its one turn ran, from the moment it was ready. */
  busyMinutes: number;
  tokens: { input: number; output: number; costUsd?: number };
}

export async function insertSandboxLife(db: Db, tenantId: string, life: SandboxLife): Promise<void> {
  const conv = await insertConversation(db, tenantId);
  const sandbox = uuidv7();
  await db
    .insertInto('sandboxes')
    .values({
      id: sandbox,
      tenant_id: tenantId,
      conversation_id: conv.id,
      name: `service-test-${sandbox.slice(-8)}`,
      status: 'ready',
      created_at: life.ready,
      ready_at: life.ready,
    })
    .execute();
  const turn = await insertTurn(db, conv, 1);
  await db
    .updateTable('turns')
    .set({ sandbox_id: sandbox, started_at: life.ready })
    .where('id', '=', turn)
    .execute();
  const usage = {
    input_tokens: life.tokens.input,
    output_tokens: life.tokens.output,
    ...(life.tokens.costUsd !== undefined ? { cost_usd: life.tokens.costUsd } : {}),
  };
  await db
    .updateTable('turns')
    .set({
      status: 'succeeded',
      ended_at: new Date(life.ready.getTime() + life.busyMinutes * 60_000),
      usage: JSON.stringify(usage),
    })
    .where('id', '=', turn)
    .execute();
  await db
    .updateTable('sandboxes')
    .set({ status: 'terminated', ended_at: new Date(life.ready.getTime() + life.hours * 3_600_000) })
    .where('id', '=', sandbox)
    .execute();
}

/** A ready time whose sandbox of `hours` ends this month (UTC) and before now. */
export function readyThisMonth(hours: number): Date {
  const now = new Date();
  const month = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
  return new Date(Math.max(month, now.getTime() - (hours + 1) * 3_600_000));
}
