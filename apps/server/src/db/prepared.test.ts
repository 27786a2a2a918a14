import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { createTestDatabase, type TestDatabase } from '../../test/helpers/database.ts';
import { createVerifiedUser } from '../../test/helpers/factories.ts';
import { prepared } from './prepared.ts';
import { preparedStatementName } from './statement-names.ts';

describe('prepared statements', () => {
  let t: TestDatabase;
  before(async () => {
    t = await createTestDatabase();
  });
  after(async () => {
    await t.drop();
  });

  const byEmail = prepared('test_user_by_email', (db, p: { email: string; other: string }) =>
    db
      .selectFrom('users')
      .select(['id', 'email', 'created_at', 'is_admin'])
      .where((eb) =>
        eb.or([eb('email', '=', p.email), eb('email', '=', p.other), eb('email', '=', p.email)]),
      ),
  );

  it('return exactly the rows Kysely returns, with the same types', async () => {
    const user = await createVerifiedUser(t.handle.db);
    const viaKysely = await t.handle.db
      .selectFrom('users')
      .select(['id', 'email', 'created_at', 'is_admin'])
      .where('email', '=', user.email)
      .execute();
    const viaPrepared = await byEmail.all(t.handle.db, { email: user.email, other: 'nobody@example.com' });
    assert.deepEqual(viaPrepared, viaKysely);
    assert.ok(viaPrepared[0]?.created_at instanceof Date);
    assert.equal(
      await byEmail.first(t.handle.db, { email: 'missing@example.com', other: 'x@example.com' }),
      undefined,
    );
  });

  it('map repeated placeholders to their positions', async () => {
    const a = await createVerifiedUser(t.handle.db);
    const b = await createVerifiedUser(t.handle.db);
    const rows = await byEmail.all(t.handle.db, { email: a.email, other: b.email });
    assert.deepEqual(rows.map((r) => r.email).sort(), [a.email, b.email].sort());
  });

  it('run as named statements that the server keeps per connection', async () => {
    const user = await createVerifiedUser(t.handle.db);
    await t.handle.db.connection().execute(async (conn) => {
      await byEmail.all(conn, { email: user.email, other: user.email });
      const names = await sql<{ name: string }>`SELECT name FROM pg_prepared_statements`.execute(conn);
      const text = [...names.rows.map((r) => r.name)];
      assert.ok(
        text.some((n) => n.startsWith('test_user_by_email_')),
        `expected a prepared statement, got ${JSON.stringify(text)}`,
      );
    });
    assert.ok(preparedStatementName('select 1') === undefined, 'unregistered SQL stays unnamed');
  });

  it('work inside a transaction', async () => {
    const email = `trx-${Date.now()}@example.com`;
    await t.handle.db
      .transaction()
      .execute(async (trx) => {
        await trx
          .insertInto('users')
          .values({ id: crypto.randomUUID(), email, password_hash: null })
          .execute();
        const row = await byEmail.first(trx, { email, other: email });
        assert.equal(row?.email, email);
        throw new Error('rollback');
      })
      .catch((err: unknown) => {
        if (!(err instanceof Error) || err.message !== 'rollback') throw err;
      });
    assert.equal(await byEmail.first(t.handle.db, { email, other: email }), undefined);
  });

  it('refuse a parameter that does not come from the placeholders', async () => {
    const bad = prepared('test_bad', (db, p: { email: string }) =>
      db.selectFrom('users').select('id').where('email', '=', p.email).where('is_admin', '=', true),
    );
    await assert.rejects(
      bad.all(t.handle.db, { email: 'x@example.com' }),
      /every parameter must come from the placeholders/,
    );
  });
});
