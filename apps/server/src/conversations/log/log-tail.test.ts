// The shared log tail against the real PostgreSQL and feed: rows handed over by the writer of
// the same process, and the reads it still does.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { type ConversationRow, insertConversation } from '../../../test/helpers/conversation-rows.ts';
import { createTestDatabase, type TestDatabase } from '../../../test/helpers/database.ts';
import { createVerifiedUser } from '../../../test/helpers/factories.ts';
import { createLogger } from '../../observability/logger.ts';
import { createFeed, type PgFeed } from './feed.ts';
import type { LogEventRow } from './log-events.repo.ts';
import { createLogTails, type LogTail, type LogTails } from './log-tail.ts';
import { createLogWriter } from './log-writer.ts';
import { createSecretRegistry } from './redactor.ts';

let database: TestDatabase;
let feed: PgFeed;
let tails: LogTails;
let tenantId: string;
const logger = createLogger({ level: 'silent' });

before(async () => {
  database = await createTestDatabase();
  feed = createFeed({ pool: database.handle.pool, clientConfig: { connectionString: database.url }, logger });
  await feed.listening();
  tails = createLogTails({
    db: database.handle.db,
    feed,
    logger,
    frame: (row) => `${row.id}:${row.data?.toString() ?? row.stage}\n`,
  });
  tenantId = (await createVerifiedUser(database.handle.db)).id;
});
after(async () => {
  await feed.close();
  await database.drop();
});

function writerFor(conversation: ConversationRow) {
  return createLogWriter(
    { pool: database.handle.pool, feed, logger, outputBudgetMb: 0 },
    {
      lease: { tenantId: conversation.tenantId, conversationId: conversation.id, epoch: conversation.epoch },
      registry: createSecretRegistry(),
    },
  );
}

const text = (tail: LogTail): string => Buffer.concat(tail.after(0n, null, 1 << 20).frames).toString();

/** A row that is not in the database: a tail that shows it did not read it from there. */
function phantom(id: bigint, data: string): LogEventRow {
  return {
    id: id.toString(),
    turn_id: null,
    stream: 'stdout',
    data: Buffer.from(data),
    stage: null,
    state: null,
    duration_ms: null,
    message: null,
    created_at: new Date(),
  };
}

describe('the log tail', () => {
  it("appends the rows its process's writer committed without reading them back", async () => {
    const conversation = await insertConversation(database.handle.db, tenantId);
    const tail = await tails.acquire(tenantId, conversation.id);
    try {
      const writer = writerFor(conversation);
      writer.output('stdout', Buffer.from('first'));
      await writer.flush();
      await tail.refresh();
      assert.match(text(tail), /:first\n$/);
      // The writer's next batch arrives with its rows: they are in the tail at once, no read.
      writer.output('stdout', Buffer.from('second'));
      await writer.flush();
      assert.match(text(tail), /:first\n\d+:second\n$/);
      // Proof that no read is involved: rows that follow and exist nowhere but in the signal.
      const id = tail.last + 1000n;
      feed.publish(conversation.id, {
        type: 'events',
        lastId: id.toString(),
        committed: { after: tail.last.toString(), rows: [phantom(id, 'handed')] },
      });
      assert.match(text(tail), new RegExp(`${id}:handed\\n$`));
      assert.equal(tail.last, id);
      await writer.close();
    } finally {
      tail.release();
    }
  });

  it('reads the database when handed rows that do not follow the ones it holds', async () => {
    const conversation = await insertConversation(database.handle.db, tenantId);
    const tail = await tails.acquire(tenantId, conversation.id);
    try {
      const writer = writerFor(conversation);
      writer.output('stdout', Buffer.from('stored'));
      await writer.close();
      await tail.refresh();
      const held = tail.last;
      // A gap (after is not the last row held): the handed rows are not taken.
      const id = held + 1000n;
      feed.publish(conversation.id, {
        type: 'events',
        lastId: id.toString(),
        committed: { after: (held - 1n).toString(), rows: [phantom(id, 'gap')] },
      });
      await tail.refresh();
      assert.doesNotMatch(text(tail), /gap/);
      assert.match(text(tail), /:stored\n$/);
      assert.equal(tail.last, held);
    } finally {
      tail.release();
    }
  });
});
