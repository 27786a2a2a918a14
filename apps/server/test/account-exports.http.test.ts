// Data exports of an account (docs/data-export.md) against a real PostgreSQL and the real job
// runner: asked for, built in the background, downloaded as gzipped JSON that holds what the
// account owns and no secret value; one at a time, rate limited, tenant-isolated, mailed.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { gunzipSync } from 'node:zlib';
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import { stringify } from 'yaml';
import { compileManifests } from '../../cli/src/manifest.ts';
import {
  BUILD_EXPORT_TASK,
  CHUNK_BYTES,
  createBuildExportTask,
  EXPORT_TTL_MS,
} from '../src/account-exports/account-exports.build.ts';
import type { JobRunner } from '../src/jobs/worker.ts';
import { startJobs } from './helpers/accounts.ts';
import { buildTestApp, type TestApp } from './helpers/app.ts';
import { insertConversation, insertTurn } from './helpers/conversation-rows.ts';
import { createVerifiedUser, type TestUser } from './helpers/factories.ts';
import { createSmtpCapture, type SmtpCapture } from './helpers/smtp.ts';

const ENV_SECRET = 'env-secret-value-6b1f0c2e9a';
const VAULT_SECRET = 'vault-secret-value-41d7ab93';
const INFERENCE_KEY = 'sk-ant-inference-key-93c0ffee7d21';

let t: TestApp;
let smtp: SmtpCapture;
let jobs: JobRunner;
before(async () => {
  smtp = await createSmtpCapture();
  t = await buildTestApp({
    env: { EMAIL_DELIVERY: '', SMTP_HOST: '127.0.0.1', SMTP_PORT: String(smtp.port) },
  });
  jobs = await startJobs(t);
});
after(async () => {
  await jobs.stop();
  await t.close();
  await smtp.stop();
});

type View = {
  id: string;
  status: string;
  size_bytes: number | null;
  expires_at: string | null;
  download_url: string | null;
};

async function requestExport(user: TestUser): Promise<View> {
  const res = await t.app.inject({ method: 'POST', url: '/api/account/exports', headers: user.auth });
  assert.equal(res.statusCode, 202, res.body);
  return res.json() as View;
}

async function waitReady(user: TestUser, id: string): Promise<View> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const res = await t.app.inject({ url: `/api/account/exports/${id}`, headers: user.auth });
    assert.equal(res.statusCode, 200, res.body);
    const view = res.json() as View;
    if (view.status === 'ready' || view.status === 'failed') return view;
    assert.ok(Date.now() < deadline, `export still ${view.status}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function download(user: TestUser, id: string) {
  const res = await t.app.inject({ url: `/api/account/exports/${id}/download`, headers: user.auth });
  assert.equal(res.statusCode, 200, res.body);
  const text = gunzipSync(res.rawPayload).toString('utf8');
  return { res, text, doc: JSON.parse(text) as Record<string, unknown> };
}

/** An account with an environment, a vault and an agent holding secrets, and a conversation log. */
async function seededUser(): Promise<{ user: TestUser; conversationId: string }> {
  const user = await createVerifiedUser(t.deps.db);
  const apply = await t.app.inject({
    method: 'POST',
    url: '/api/apply',
    headers: user.auth,
    payload: {
      resources: [
        {
          kind: 'Environment',
          name: 'web',
          spec: { env_vars: { NODE_ENV: 'test' }, secrets: { GITHUB_TOKEN: ENV_SECRET } },
        },
        { kind: 'Vault', name: 'prod', spec: { secrets: { API_TOKEN: VAULT_SECRET } } },
        {
          kind: 'Agent',
          name: 'reviewer',
          spec: {
            model: 'anthropic/claude-sonnet-4-5',
            runtime: 'claude',
            environment: 'web',
            vaults: ['prod'],
          },
        },
      ],
    },
  });
  assert.equal(apply.statusCode, 200, apply.body);
  const cred = await t.app.inject({
    method: 'PUT',
    url: '/api/account/inference-credentials/anthropic',
    headers: user.auth,
    payload: { api_key: INFERENCE_KEY },
  });
  assert.ok(cred.statusCode < 300, cred.body);
  const conversation = await insertConversation(t.deps.db, user.id, { status: 'idle' });
  const turnId = await insertTurn(t.deps.db, conversation);
  await t.deps.db
    .insertInto('log_events')
    .values([
      {
        tenant_id: user.id,
        conversation_id: conversation.id,
        turn_id: turnId,
        stream: 'stdout',
        data: Buffer.from('hello from the agent\n'),
      },
      {
        tenant_id: user.id,
        conversation_id: conversation.id,
        turn_id: turnId,
        stream: 'stderr',
        data: Buffer.from([0xff, 0xfe, 0x00]),
      },
      {
        tenant_id: user.id,
        conversation_id: conversation.id,
        turn_id: turnId,
        stream: 'stage',
        stage: 'turn',
        state: 'done',
        duration_ms: 12,
        message: 'exit 0',
      },
    ])
    .execute();
  return { user, conversationId: conversation.id };
}

describe('account data export', () => {
  it('builds in the background and downloads everything the account owns, without a secret value', async () => {
    const { user, conversationId } = await seededUser();
    const asked = await requestExport(user);
    assert.equal(asked.status, 'pending');
    assert.equal(asked.download_url, null);

    const ready = await waitReady(user, asked.id);
    assert.equal(ready.status, 'ready');
    assert.ok(ready.size_bytes && ready.size_bytes > 0);
    const ttl = Date.parse(ready.expires_at ?? '') - Date.now();
    assert.ok(ttl > EXPORT_TTL_MS - 60_000 && ttl <= EXPORT_TTL_MS, `expires in ${ttl} ms`);
    assert.equal(ready.download_url, `/api/account/exports/${asked.id}/download`);

    const { res, text, doc } = await download(user, asked.id);
    assert.equal(res.headers['content-type'], 'application/gzip');
    assert.equal(Number(res.headers['content-length']), ready.size_bytes);
    assert.match(
      String(res.headers['content-disposition']),
      /^attachment; filename="paddock-export-\d{4}-\d\d-\d\d\.json\.gz"$/,
    );

    for (const secret of [ENV_SECRET, VAULT_SECRET, INFERENCE_KEY]) {
      assert.ok(!text.includes(secret), 'no secret value in the decompressed export');
      assert.ok(!res.rawPayload.includes(Buffer.from(secret)), 'nor in its bytes');
    }
    assert.equal(doc['format'], 'paddock.account-export');
    assert.deepEqual((doc['account'] as { id: string }).id, user.id);

    const manifests = doc['manifests'] as Array<{ kind: string; metadata: { name: string } }>;
    assert.deepEqual(
      manifests.map((m) => `${m.kind}/${m.metadata.name}`),
      ['Environment/web', 'Vault/prod', 'Agent/reviewer'],
    );
    // The manifests are what `paddock apply` takes again: everything comes back unchanged.
    const compiled = compileManifests(
      [{ path: 'export.yaml', text: manifests.map((m) => stringify(m)).join('---\n') }],
      {
        GITHUB_TOKEN: ENV_SECRET,
        API_TOKEN: VAULT_SECRET,
      },
    );
    const again = await t.app.inject({
      method: 'POST',
      url: '/api/apply',
      headers: user.auth,
      payload: { resources: compiled.resources },
    });
    assert.deepEqual(again.json().summary, { created: 0, updated: 0, unchanged: 3, error: 0 });

    const conversations = doc['conversations'] as Array<Record<string, unknown>>;
    assert.equal(conversations.length, 1);
    const c = conversations[0]!;
    assert.equal(c['id'], conversationId);
    assert.equal((c['turns'] as Array<{ prompt: string }>)[0]!.prompt, 'echo hi');
    assert.deepEqual(
      (c['log_events'] as Array<Record<string, unknown>>).map((e) => [
        e['stream'],
        e['data'] ?? e['data_base64'] ?? e['message'],
      ]),
      [
        ['stdout', 'hello from the agent\n'],
        ['stderr', Buffer.from([0xff, 0xfe, 0x00]).toString('base64')],
        ['stage', 'exit 0'],
      ],
    );
    const audit = (doc['audit_events'] as Array<{ type: string }>).map((e) => e.type);
    assert.ok(audit.includes('apply.completed') && audit.includes('account.export_requested'), audit.join());

    const mail = await smtp.waitFor(user.email, /data export is ready/, 15_000);
    assert.match(mail.decoded, /\/account/);
  });

  it('keeps one export at a time per account, and at most 3 per 24 hours', async () => {
    const user = await createVerifiedUser(t.deps.db);
    // An export still being built (its row only: no job builds it here).
    const buildingId = uuidv7();
    await t.deps.db
      .insertInto('account_exports')
      .values({ id: buildingId, tenant_id: user.id, status: 'building' })
      .execute();
    const busy = await t.app.inject({ method: 'POST', url: '/api/account/exports', headers: user.auth });
    assert.equal(busy.statusCode, 409, busy.body);
    assert.equal(busy.json().error, 'export_in_progress');
    assert.equal(busy.json().export_id, buildingId);

    // Done, it counts toward the window with one more; one from 25 hours ago does not.
    const hoursAgo = (h: number) => new Date(Date.now() - h * 3600_000);
    await t.deps.db
      .updateTable('account_exports')
      .set({ status: 'failed' })
      .where('id', '=', buildingId)
      .execute();
    await t.deps.db
      .insertInto('account_exports')
      .values([
        { id: uuidv7(), tenant_id: user.id, status: 'ready', created_at: hoursAgo(25) },
        { id: uuidv7(), tenant_id: user.id, status: 'ready', created_at: hoursAgo(2) },
      ])
      .execute();
    const third = await requestExport(user);
    await waitReady(user, third.id);
    const limited = await t.app.inject({ method: 'POST', url: '/api/account/exports', headers: user.auth });
    assert.equal(limited.statusCode, 429, limited.body);
    assert.equal(limited.json().error, 'rate_limited');
    // The oldest of the window (2 hours ago) leaves it in 22 hours.
    const retryAfter = Number(limited.headers['retry-after']);
    assert.ok(Math.abs(retryAfter - 22 * 3600) < 120, `retry-after ${retryAfter}`);
  });

  it('treats another account’s export, or a non-id, as missing', async () => {
    const owner = await createVerifiedUser(t.deps.db);
    const other = await createVerifiedUser(t.deps.db);
    const asked = await requestExport(owner);
    await waitReady(owner, asked.id);
    for (const url of [`/api/account/exports/${asked.id}`, `/api/account/exports/${asked.id}/download`]) {
      const res = await t.app.inject({ url, headers: other.auth });
      assert.equal(res.statusCode, 404, res.body);
      assert.equal(res.json().error, 'not_found');
    }
    for (const id of ['not-an-id', uuidv7()]) {
      const res = await t.app.inject({ url: `/api/account/exports/${id}/download`, headers: owner.auth });
      assert.equal(res.statusCode, 404, res.body);
    }
    const list = await t.app.inject({ url: '/api/account/exports', headers: other.auth });
    assert.deepEqual(list.json().data, []);
    const anonymous = await t.app.inject({ method: 'POST', url: '/api/account/exports' });
    assert.equal(anonymous.statusCode, 401);
  });

  it('refuses to download an export not built yet (409) or expired (410)', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const pendingId = uuidv7();
    await t.deps.db.insertInto('account_exports').values({ id: pendingId, tenant_id: user.id }).execute();
    const pending = await t.app.inject({
      url: `/api/account/exports/${pendingId}/download`,
      headers: user.auth,
    });
    assert.equal(pending.statusCode, 409, pending.body);
    assert.equal(pending.json().error, 'export_not_ready');

    const expiredId = uuidv7();
    await t.deps.db
      .insertInto('account_exports')
      .values({
        id: expiredId,
        tenant_id: user.id,
        status: 'ready',
        size_bytes: 3,
        expires_at: new Date(Date.now() - 1000),
      })
      .execute();
    const view = await t.app.inject({ url: `/api/account/exports/${expiredId}`, headers: user.auth });
    assert.equal(view.json().status, 'expired');
    const expired = await t.app.inject({
      url: `/api/account/exports/${expiredId}/download`,
      headers: user.auth,
    });
    assert.equal(expired.statusCode, 410, expired.body);
    assert.equal(expired.json().error, 'export_expired');
  });

  it('rebuilds from scratch when its job runs again, and stores a large payload in chunks', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const conversation = await insertConversation(t.deps.db, user.id, { status: 'idle' });
    // Incompressible output, so the gzipped payload spans more than one chunk.
    await sql`
      INSERT INTO log_events (tenant_id, conversation_id, stream, data)
      SELECT ${user.id}::uuid, ${conversation.id}::uuid, 'stdout',
        convert_to((SELECT string_agg(md5(random()::text || n::text || k::text), '') FROM generate_series(1, 100) k), 'UTF8')
      FROM generate_series(1, 1000) n`.execute(t.deps.db);
    const asked = await requestExport(user);
    const first = await waitReady(user, asked.id);
    const chunks = async () =>
      await t.deps.db
        .selectFrom('account_export_chunks')
        .select(['seq'])
        .where('export_id', '=', asked.id)
        .orderBy('seq')
        .execute();
    const stored = (await chunks()).map((c) => c.seq);
    assert.ok(stored.length > 1 && first.size_bytes! > CHUNK_BYTES, `${stored.length} chunks`);

    // A crash mid-build leaves it `building`; the queue's second run replaces what the first stored.
    await t.deps.db
      .updateTable('account_exports')
      .set({ status: 'building' })
      .where('id', '=', asked.id)
      .execute();
    const task = t.deps.jobTasks[BUILD_EXPORT_TASK];
    assert.ok(typeof task === 'function');
    // biome-ignore lint/suspicious/noExplicitAny: the helpers argument is not used by the task
    await task({ exportId: asked.id }, {} as any);
    assert.deepEqual(
      (await chunks()).map((c) => c.seq),
      stored,
    );
    const { doc } = await download(user, asked.id);
    const logs = (doc['conversations'] as Array<{ log_events: unknown[] }>)[0]!.log_events;
    assert.equal(logs.length, 1000);
  });

  it('marks an export failed, with a reason and no payload, when its writer cannot finish', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const id = uuidv7();
    await t.deps.db.insertInto('account_exports').values({ id, tenant_id: user.id }).execute();
    // The writer thread's database is a closed port: it fails to connect and reports it.
    const task = createBuildExportTask({
      db: t.deps.db,
      pool: { connectionString: 'postgres://paddock@127.0.0.1:9/paddock', connectionTimeoutMillis: 2000 },
      exporter: t.deps.exporter,
      mailQueue: t.deps.mailQueue,
      logger: t.deps.logger,
    });
    // biome-ignore lint/suspicious/noExplicitAny: the helpers argument is not used by the task
    await task({ exportId: id }, {} as any);
    const view = await t.app.inject({ url: `/api/account/exports/${id}`, headers: user.auth });
    assert.equal(view.json().status, 'failed');
    assert.equal(view.json().failure_reason, 'the export could not be built; ask for a new one');
    const chunks = await t.deps.db
      .selectFrom('account_export_chunks')
      .select('seq')
      .where('export_id', '=', id)
      .execute();
    assert.equal(chunks.length, 0);
    assert.ok(t.logs.some((l) => l.includes('account export failed') && l.includes(id)));
    // A failed export no longer blocks the account: it may ask again.
    await requestExport(user);
  });

  it('goes with the account: deleting the user deletes its exports and their payload', async () => {
    const user = await createVerifiedUser(t.deps.db);
    const asked = await requestExport(user);
    await waitReady(user, asked.id);
    await t.deps.db.deleteFrom('users').where('id', '=', user.id).execute();
    const rows = await t.deps.db
      .selectFrom('account_exports')
      .select('id')
      .where('id', '=', asked.id)
      .execute();
    const chunks = await t.deps.db
      .selectFrom('account_export_chunks')
      .select('seq')
      .where('export_id', '=', asked.id)
      .execute();
    assert.deepEqual([rows.length, chunks.length], [0, 0]);
  });
});
