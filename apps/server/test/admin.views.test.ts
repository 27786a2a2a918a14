// The admin's user management and cross-tenant views over HTTP against a real PostgreSQL:
// search, verify, promote; one account's metadata, its conversations, one conversation —
// metadata only, each read audited in the admin's own log.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { v7 as uuidv7 } from 'uuid';
import { auditRows } from './helpers/accounts.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { insertConversation, insertTurn } from './helpers/conversation-rows.ts';
import { createVerifiedUser } from './helpers/factories.ts';

let t: TestApp;
before(async () => {
  t = await buildTestApp();
});
after(async () => {
  await t.close();
});

const CONTENT = 'private-prompt-content-7f3a';

describe('admin user management', () => {
  it('searches accounts by a substring of the email, wildcards taken literally', async () => {
    const admin = await createVerifiedUser(t.deps.db, { isAdmin: true });
    const tag = uuidv7().slice(-8);
    await createVerifiedUser(t.deps.db, { email: `Grace.${tag}@Example.com` });
    await createVerifiedUser(t.deps.db, { email: `linus_${tag}@example.com` });
    const search = async (q: string) =>
      (
        await t.app.inject({ url: `/api/admin/users?search=${encodeURIComponent(q)}`, headers: admin.auth })
      ).json() as { data: { email: string }[] };
    assert.deepEqual(
      (await search(`grace.${tag}`)).data.map((u) => u.email),
      [`Grace.${tag}@Example.com`],
    );
    assert.equal((await search(tag)).data.length, 2);
    assert.equal((await search(`%${tag}`)).data.length, 0, '% is not a wildcard');
    assert.equal((await search(`_${tag}`)).data.length, 1, '_ is not a wildcard');
  });

  it('verifies an account’s email and promotes it, audited as the admin’s acts; a non-admin is refused', async () => {
    const admin = await createVerifiedUser(t.deps.db, { isAdmin: true });
    const user = await createVerifiedUser(t.deps.db);

    for (const action of ['verify', 'promote']) {
      const refused = await t.app.inject({
        method: 'POST',
        url: `/api/admin/users/${admin.id}/${action}`,
        headers: user.auth,
      });
      assert.equal(refused.statusCode, 403, action);
    }
    await t.deps.db.updateTable('users').set({ email_verified_at: null }).where('id', '=', user.id).execute();
    const verified = await t.app.inject({
      method: 'POST',
      url: `/api/admin/users/${user.id}/verify`,
      headers: admin.auth,
    });
    assert.equal(verified.statusCode, 200, verified.body);
    assert.equal(verified.json().user.email_verified, true);
    const promoted = await t.app.inject({
      method: 'POST',
      url: `/api/admin/users/${user.id}/promote`,
      headers: admin.auth,
    });
    assert.equal(promoted.json().user.is_admin, true);
    // Twice is the same answer and no second audit event.
    await t.app.inject({ method: 'POST', url: `/api/admin/users/${user.id}/promote`, headers: admin.auth });
    const granted = (await auditRows(t, 'admin.role.granted')).filter((r) => r.tenant_id === user.id);
    assert.equal(granted.length, 1);
    assert.deepEqual(granted[0]!.metadata, { via: 'admin', user_id: user.id, admin_user_id: admin.id });
    const verifiedEvents = (await auditRows(t, 'user.email_verified')).filter((r) => r.tenant_id === user.id);
    assert.deepEqual(verifiedEvents[0]!.metadata, { via: `admin:${admin.id}` });

    for (const id of [uuidv7(), 'not-a-uuid']) {
      const missing = await t.app.inject({
        method: 'POST',
        url: `/api/admin/users/${id}/verify`,
        headers: admin.auth,
      });
      assert.equal(missing.statusCode, 404);
    }
  });
});

describe('admin cross-tenant views', () => {
  it('shows an account, its conversations and one conversation as metadata only, each read audited', async () => {
    const admin = await createVerifiedUser(t.deps.db, { isAdmin: true });
    const user = await createVerifiedUser(t.deps.db);
    const conversation = await insertConversation(t.deps.db, user.id, { status: 'idle' });
    await insertTurn(t.deps.db, conversation, 1);
    // Content in every place a careless view could read it from.
    await t.deps.db
      .updateTable('conversations')
      .set({ title: CONTENT, failure_reason: CONTENT })
      .where('id', '=', conversation.id)
      .execute();
    await t.deps.db
      .updateTable('turns')
      .set({
        prompt: CONTENT,
        error: CONTENT,
        status: 'succeeded',
        usage: JSON.stringify({ input_tokens: 12 }),
      })
      .where('conversation_id', '=', conversation.id)
      .execute();
    await t.deps.db
      .insertInto('log_events')
      .values({
        tenant_id: user.id,
        conversation_id: conversation.id,
        turn_id: null,
        stream: 'stdout',
        data: Buffer.from(CONTENT),
      })
      .execute();
    await t.app.inject({
      method: 'POST',
      url: '/api/environments',
      headers: user.auth,
      payload: { name: 'web' },
    });

    const detail = await t.app.inject({ url: `/api/admin/users/${user.id}`, headers: admin.auth });
    assert.equal(detail.statusCode, 200, detail.body);
    assert.equal(detail.json().user.email, user.email);
    assert.deepEqual(detail.json().counts, {
      environments: 1,
      vaults: 0,
      agents: 0,
      conversations: 1,
      active_api_keys: 1,
    });

    const list = await t.app.inject({
      url: `/api/admin/users/${user.id}/conversations`,
      headers: admin.auth,
    });
    assert.equal(list.statusCode, 200, list.body);
    assert.deepEqual(
      list
        .json()
        .data.map((c: { id: string; status: string; turn_count: number }) => [c.id, c.status, c.turn_count]),
      [[conversation.id, 'idle', 1]],
    );

    const one = await t.app.inject({
      url: `/api/admin/conversations/${conversation.id}`,
      headers: admin.auth,
    });
    assert.equal(one.statusCode, 200, one.body);
    assert.equal(one.json().owner_email, user.email);
    assert.deepEqual(
      one
        .json()
        .turns.map((x: { seq: number; status: string; usage: unknown }) => [x.seq, x.status, x.usage]),
      [[1, 'succeeded', { input_tokens: 12 }]],
    );

    for (const res of [detail, list, one])
      assert.ok(!res.body.includes(CONTENT), 'no content in an admin view');

    const reads = (await auditRows(t))
      .filter((r) => r.tenant_id === admin.id && r.type.startsWith('admin.'))
      .map((r) => [r.type, (r.metadata as { target_user_id?: string }).target_user_id]);
    assert.deepEqual(reads, [
      ['admin.user.read', user.id],
      ['admin.conversations.listed', user.id],
      ['admin.conversation.read', user.id],
    ]);
  });

  it('refuses the views to a non-admin and answers 404 for unknown ids', async () => {
    const admin = await createVerifiedUser(t.deps.db, { isAdmin: true });
    const user = await createVerifiedUser(t.deps.db);
    const conversation = await insertConversation(t.deps.db, admin.id);
    for (const url of [
      `/api/admin/users/${admin.id}`,
      `/api/admin/users/${admin.id}/conversations`,
      `/api/admin/conversations/${conversation.id}`,
    ]) {
      assert.equal((await t.app.inject({ url, headers: user.auth })).statusCode, 403, url);
    }
    for (const url of [
      `/api/admin/users/${uuidv7()}`,
      '/api/admin/users/nope/conversations',
      `/api/admin/conversations/${uuidv7()}`,
    ]) {
      assert.equal((await t.app.inject({ url, headers: admin.auth })).statusCode, 404, url);
    }
    const badCursor = await t.app.inject({
      url: `/api/admin/users/${user.id}/conversations?cursor=zzz`,
      headers: admin.auth,
    });
    assert.equal(badCursor.statusCode, 422);
  });
});
