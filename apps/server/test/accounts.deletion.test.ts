// Issue 38, deliverable 5: account deletion, one path for the person, an admin and the
// pruner (src/accounts/account-deletion.ts). Against the real sandboxd with the scripted
// runtime: an account with a turn running in a provisioned sandbox is deleted, and afterwards
// no backend sandbox of it exists, no row names it but the deletion's audit record, and a
// ciphertext of it saved before the deletion opens with no key the master key can unwrap.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import { TENANT_ROWS_WITHOUT_CASCADE } from '../src/accounts/account-deletion.repo.ts';
import { hashPassword } from '../src/accounts/password.ts';
import type { Db } from '../src/db/database.ts';
import { decryptSecret, unwrapDataKey } from '../src/secrets/envelope.ts';
import { type ConversationHarness, startConversationHarness, waitUntil } from './helpers/conversations.ts';
import type { TestUser } from './helpers/factories.ts';

const password = 'correct horse battery staple 9';

let h: ConversationHarness;
before(async () => {
  h = await startConversationHarness({ engine: { lifecycle: { tickMs: 100 } } });
});
after(async () => {
  await h.close();
});

async function withPassword(user: TestUser): Promise<void> {
  await h.deps.db
    .updateTable('users')
    .set({ password_hash: await hashPassword(password) })
    .where('id', '=', user.id)
    .execute();
}

/** Tables of the public schema and their columns (uuid and text-like) for the row scans. */
async function publicTables(db: Db): Promise<string[]> {
  const { rows } = await sql<{ table_name: string }>`
    SELECT table_name FROM information_schema.tables
     WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name`.execute(db);
  return rows.map((r) => r.table_name);
}

/**
 * Every row of the public schema whose text form mentions `needle` (an id or an address),
 * as `table: row`: finds a tenant's rows in any column, listed or not.
 */
async function rowsMentioning(db: Db, needle: string): Promise<string[]> {
  const found: string[] = [];
  for (const table of await publicTables(db)) {
    const { rows } = await sql<{ row: string }>`
      SELECT t::text AS row FROM ${sql.table(table)} t WHERE t::text ILIKE ${`%${needle}%`}`.execute(db);
    for (const r of rows) found.push(`${table}: ${r.row}`);
  }
  return found;
}

describe('account deletion (DELETE /api/account)', () => {
  it('deletes an account with a running turn: no backend sandbox, no row but the audit record, ciphertexts undecryptable', async () => {
    const user = await h.user();
    await withPassword(user);
    const other = await h.user();
    const otherVault = await h.vault(other);
    const otherSecret = await h.api(other, 'POST', `/api/vaults/${otherVault}/secrets`, {
      key: 'OTHER_TOKEN',
      value: 'another-accounts-secret',
    });
    assert.equal(otherSecret.status, 201, JSON.stringify(otherSecret.body));
    const otherAgent = await h.agent(other);
    const otherConv = await h.start(other, { agent_id: otherAgent, prompt: 'echo other' });
    await h.waitFor(other, otherConv.id, (c) => c.status === 'idle');

    const env = await h.environment(user);
    const secret = await h.api(user, 'POST', `/api/environments/${env}/secrets`, {
      key: 'DEPLOY_TOKEN',
      value: 'deletion-test-secret-value',
    });
    assert.equal(secret.status, 201, JSON.stringify(secret.body));
    const vault = await h.vault(user);
    const agent = await h.agent(user, { environment_id: env, vault_ids: [vault] });
    const conv = await h.start(user, { agent_id: agent, vault_id: vault, prompt: 'echo started; sleep 120' });
    await waitUntil(async () => (await h.stdout(conv.id)).includes('started'), 60_000);
    const running = await h.get(user, conv.id);
    assert.equal(running.status, 'running');
    const sandboxName = (
      await h.deps.db
        .selectFrom('sandboxes')
        .select('name')
        .where('conversation_id', '=', conv.id)
        .where('status', '=', 'ready')
        .executeTakeFirstOrThrow()
    ).name;
    assert.ok((await h.backendSandboxes()).includes(sandboxName), 'the sandbox runs on the backend');

    // The ciphertext as a backup would hold it, and proof that it opens before the deletion.
    const saved = await h.deps.db
      .selectFrom('secrets')
      .select(['ciphertext', 'environment_id', 'key'])
      .where('tenant_id', '=', user.id)
      .executeTakeFirstOrThrow();
    const binding = {
      tenantId: user.id,
      ownerKind: 'environment' as const,
      ownerId: saved.environment_id!,
      key: saved.key,
    };
    const masterKey = h.config.masterSecretsKey!;
    const keyBefore = await h.deps.db
      .selectFrom('tenant_keys')
      .select('wrapped_key')
      .where('tenant_id', '=', user.id)
      .executeTakeFirstOrThrow();
    assert.equal(
      decryptSecret(unwrapDataKey(masterKey, user.id, keyBefore.wrapped_key), binding, saved.ciphertext),
      'deletion-test-secret-value',
    );

    // The confirmation: the email typed again and the current password.
    for (const [body, field] of [
      [{ confirm_email: 'someone-else@example.com', current_password: password }, 'confirm_email'],
      [{ confirm_email: user.email }, 'current_password'],
      [{ confirm_email: user.email, current_password: 'not the password' }, 'current_password'],
    ] as const) {
      const refused = await h.api(user, 'DELETE', '/api/account', body);
      assert.equal(refused.status, 422, JSON.stringify(refused.body));
      assert.ok(refused.body.errors?.[field], JSON.stringify(refused.body));
    }
    assert.equal((await h.get(user, conv.id)).status, 'running', 'a refused deletion changes nothing');

    const deleted = await h.api(user, 'DELETE', '/api/account', {
      confirm_email: user.email.toUpperCase(),
      current_password: password,
    });
    assert.equal(deleted.status, 200, JSON.stringify(deleted.body));

    // No backend sandbox of the account, and its destroy is not owed any more.
    await waitUntil(async () => !(await h.backendSandboxes()).includes(sandboxName), 30_000);
    await waitUntil(async () => {
      const owed = await h.deps.db
        .selectFrom('sandbox_destroys')
        .select('name')
        .where('tenant_id', '=', user.id)
        .execute();
      return owed.length === 0;
    }, 30_000);

    // No row names the account (in any column, in any table) but the deletion's record, and
    // none holds its address.
    const left = await rowsMentioning(h.deps.db, user.id);
    assert.equal(left.length, 1, left.join('\n'));
    assert.match(left[0]!, /^audit_events: /);
    const [record] = await h.deps.db
      .selectFrom('audit_events')
      .selectAll()
      .where('tenant_id', '=', user.id)
      .execute();
    assert.equal(record?.type, 'user.deleted');
    assert.equal(record?.actor_user_id, user.id);
    assert.equal(record?.ip, null, "the person's own IP is not kept");
    assert.deepEqual(record?.metadata, { via: 'self', conversations: 1, sandboxes: 1 });
    assert.deepEqual(await rowsMentioning(h.deps.db, user.email), []);

    // The saved ciphertext: no tenant key left for the account, and none that the master key
    // unwraps opens it.
    const keys = await h.deps.db.selectFrom('tenant_keys').select(['tenant_id', 'wrapped_key']).execute();
    assert.ok(!keys.some((k) => k.tenant_id === user.id));
    assert.ok(keys.length > 0, 'the other account keeps its key');
    for (const k of keys) {
      const dataKey = unwrapDataKey(masterKey, k.tenant_id, k.wrapped_key);
      assert.throws(() => decryptSecret(dataKey, binding, saved.ciphertext), { name: 'DecryptionError' });
    }

    // Its key no longer authenticates; the other account and its conversation are untouched.
    assert.equal((await h.api(user, 'GET', '/api/auth/me')).status, 401);
    assert.equal((await h.get(other, otherConv.id)).status, 'idle');
    assert.equal((await h.api(other, 'GET', '/api/agents')).body.data.length, 1);
    assert.deepEqual(await h.deps.secrets.decryptOwner(other.id, { kind: 'vault', id: otherVault }), {
      OTHER_TOKEN: 'another-accounts-secret',
    });
  });

  it('deleted on another replica than the owner: the owner stops and the sandbox goes', async () => {
    const user = await h.user();
    const agent = await h.agent(user);
    const conv = await h.start(user, { agent_id: agent, prompt: 'echo owned; sleep 120' });
    await waitUntil(async () => (await h.stdout(conv.id)).includes('owned'), 60_000);
    assert.equal(h.deps.ownership.holds(conv.id), true, 'the first instance owns the running turn');
    const { name } = await h.deps.db
      .selectFrom('sandboxes')
      .select('name')
      .where('conversation_id', '=', conv.id)
      .where('status', '=', 'ready')
      .executeTakeFirstOrThrow();
    const second = await h.secondInstance();
    try {
      const res = await second.api(user, 'DELETE', '/api/account', { confirm_email: user.email });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      await waitUntil(async () => !h.deps.ownership.holds(conv.id), 20_000);
      await waitUntil(async () => !(await h.backendSandboxes()).includes(name), 30_000);
      const left = await rowsMentioning(h.deps.db, user.id);
      assert.equal(left.length, 1, left.join('\n'));
    } finally {
      await second.close();
    }
  });

  it('deleted while its sandbox provisions: the sandbox does not outlive the account', async () => {
    const user = await h.user();
    const agent = await h.agent(user);
    const conv = await h.start(user, { agent_id: agent, prompt: 'echo late; sleep 120' });
    const { name } = await h.deps.db
      .selectFrom('sandboxes')
      .select('name')
      .where('conversation_id', '=', conv.id)
      .executeTakeFirstOrThrow();
    const res = await h.api(user, 'DELETE', '/api/account', { confirm_email: user.email });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    // Long enough for a provisioning that was under way to have created the sandbox.
    await new Promise((r) => setTimeout(r, 8000));
    await waitUntil(async () => !(await h.backendSandboxes()).includes(name), 30_000);
    const left = await rowsMentioning(h.deps.db, user.id);
    assert.equal(left.length, 1, left.join('\n'));
  });

  it('a write racing the deletion is refused with 401, never a 500', async () => {
    const user = await h.user();
    // What the deletion's transaction does (account-deletion.ts): lock the users row, delete.
    const client = await h.database.handle.pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SELECT id FROM users WHERE id = $1 FOR UPDATE', [user.id]);
      const racing = h.api(user, 'POST', '/api/environments', { name: 'racing-the-deletion' });
      // The request's first insert (the tenant key) waits on the locked row: its foreign key check.
      await waitUntil(async () => {
        const { rows } = await h.database.handle.pool.query(
          `SELECT count(*)::int AS n FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        );
        return rows[0].n > 0;
      }, 10_000);
      await client.query('DELETE FROM users WHERE id = $1', [user.id]);
      await client.query('COMMIT');
      const res = await racing;
      assert.equal(res.status, 401, JSON.stringify(res.body));
      assert.equal(res.body.error, 'unauthorized');
    } finally {
      client.release();
    }
  });

  it('an account without a password confirms with its email alone; a deleted one cannot delete again', async () => {
    const user = await h.user();
    // A sandbox's conversation key acts for the account but may not delete it.
    const convId = uuidv7();
    await h.deps.db
      .insertInto('conversations')
      .values({ id: convId, tenant_id: user.id, status: 'idle', source: 'api', title: 'a conversation' })
      .execute();
    const sandboxKey = await h.deps.apiKeys.mintConversationKey(user.id, convId);
    const byKey = await h.api(
      null,
      'DELETE',
      '/api/account',
      { confirm_email: user.email },
      {
        authorization: `Bearer ${sandboxKey.key}`,
      },
    );
    assert.equal(byKey.status, 403, JSON.stringify(byKey.body));
    const missing = await h.api(user, 'DELETE', '/api/account', {});
    assert.equal(missing.status, 422);
    const unknownField = await h.api(user, 'DELETE', '/api/account', {
      confirm_email: user.email,
      password: 'x',
    });
    assert.equal(unknownField.status, 422, 'unknown fields are refused');
    const ok = await h.api(user, 'DELETE', '/api/account', { confirm_email: ` ${user.email} ` });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
    const again = await h.api(user, 'DELETE', '/api/account', { confirm_email: user.email });
    assert.equal(again.status, 401);
  });
});

describe('account deletion by an admin (DELETE /api/admin/users/:id)', () => {
  it('deletes another account, audited; refuses the own account, non-admins and unknown ids', async () => {
    const admin = await h.user();
    await h.deps.db.updateTable('users').set({ is_admin: true }).where('id', '=', admin.id).execute();
    const target = await h.user();
    const bystander = await h.user();
    const agent = await h.agent(target);
    const conv = await h.start(target, { agent_id: agent, prompt: 'echo ready' });
    await h.waitFor(target, conv.id, (c) => c.status === 'idle');

    assert.equal((await h.api(bystander, 'DELETE', `/api/admin/users/${target.id}`)).status, 403);
    assert.equal((await h.api(admin, 'DELETE', `/api/admin/users/${admin.id}`)).status, 422);
    assert.equal((await h.api(admin, 'DELETE', '/api/admin/users/not-a-uuid')).status, 404);
    assert.equal(
      (await h.api(admin, 'DELETE', '/api/admin/users/0190a0b0-0000-7000-8000-000000000000')).status,
      404,
    );

    const res = await h.api(admin, 'DELETE', `/api/admin/users/${target.id}`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal((await h.api(admin, 'DELETE', `/api/admin/users/${target.id}`)).status, 404);

    const left = await rowsMentioning(h.deps.db, target.id);
    assert.equal(left.length, 1, left.join('\n'));
    const [record] = await h.deps.db
      .selectFrom('audit_events')
      .selectAll()
      .where('tenant_id', '=', target.id)
      .execute();
    assert.equal(record?.type, 'admin.user.deleted');
    assert.equal(record?.actor_user_id, admin.id);
    assert.deepEqual(record?.metadata, {
      via: 'admin',
      conversations: 1,
      sandboxes: 1,
      admin_user_id: admin.id,
    });
    assert.equal((await h.api(target, 'GET', '/api/auth/me')).status, 401);
    assert.equal((await h.api(bystander, 'GET', '/api/auth/me')).status, 200);
  });
});

describe('the tenant tables', () => {
  it('every table with a tenant_id or user_id column cascades from users or is listed in TENANT_ROWS_WITHOUT_CASCADE', async () => {
    // Tables reached from users by a chain of ON DELETE CASCADE foreign keys.
    const { rows: fks } = await sql<{ child: string; parent: string }>`
      SELECT c.conrelid::regclass::text AS child, c.confrelid::regclass::text AS parent
        FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
       WHERE c.contype = 'f' AND c.confdeltype = 'c' AND n.nspname = 'public'`.execute(h.deps.db);
    const cascades = new Set(['users']);
    for (let grew = true; grew; ) {
      grew = false;
      for (const fk of fks) {
        if (cascades.has(fk.parent) && !cascades.has(fk.child)) {
          cascades.add(fk.child);
          grew = true;
        }
      }
    }
    const { rows: columns } = await sql<{ table_name: string; column_name: string }>`
      SELECT c.table_name, c.column_name FROM information_schema.columns c
        JOIN information_schema.tables t USING (table_schema, table_name)
       WHERE c.table_schema = 'public' AND t.table_type = 'BASE TABLE'
         AND c.column_name IN ('tenant_id', 'user_id')`.execute(h.deps.db);
    const listed = new Set(TENANT_ROWS_WITHOUT_CASCADE.map((t) => `${t.table}.${t.column}`));
    const uncovered = columns
      .filter((c) => !cascades.has(c.table_name) && !listed.has(`${c.table_name}.${c.column_name}`))
      .map((c) => `${c.table_name}.${c.column_name}`);
    assert.deepEqual(
      uncovered,
      [],
      'reference users ON DELETE CASCADE or list the table in src/accounts/account-deletion.repo.ts',
    );
    // And every listed table exists (a stale line is a mistake too).
    for (const t of TENANT_ROWS_WITHOUT_CASCADE) {
      assert.ok(
        columns.some((c) => c.table_name === t.table && c.column_name === t.column),
        `${t.table}.${t.column}`,
      );
    }
  });
});
