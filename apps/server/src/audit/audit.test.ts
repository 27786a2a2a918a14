import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { v7 as uuidv7 } from 'uuid';
import { buildTestApp, type TestApp } from '../../test/helpers/app.ts';
import { AUDIT_EVENT_TYPES } from './audit.events.ts';
import { AuditTypeRejectedError } from './audit.service.ts';

describe('audit service', () => {
  let t: TestApp;
  before(async () => {
    t = await buildTestApp();
  });
  after(async () => {
    await t.close();
  });

  it('records an allowlisted event with actor, tenant, ip and metadata', async () => {
    const tenantId = uuidv7();
    await t.deps.audit.record({
      type: 'api_key.created',
      tenantId,
      actor: { kind: 'user', userId: tenantId },
      ip: '203.0.113.7',
      metadata: { name: 'ci' },
    });
    const page = await t.deps.audit.list(tenantId, {});
    assert.equal(page.data.length, 1);
    const [event] = page.data;
    assert.equal(event?.type, 'api_key.created');
    assert.deepEqual(event?.actor, { kind: 'user', user_id: tenantId, api_key_id: null });
    assert.equal(event?.ip, '203.0.113.7');
    assert.deepEqual(event?.metadata, { name: 'ci' });
    assert.deepEqual(page.meta, { next_cursor: null, has_more: false });
  });

  it('rejects a type missing from the allowlist with an error log and a counter, writing nothing', async () => {
    const tenantId = uuidv7();
    await assert.rejects(
      t.deps.audit.record({ type: 'made.up', tenantId, actor: { kind: 'system' } }),
      AuditTypeRejectedError,
    );
    assert.equal((await t.deps.audit.list(tenantId, {})).data.length, 0);
    const line = t.logs.map((l) => JSON.parse(l)).find((l) => l.eventType === 'made.up');
    assert.equal(line?.level, 'error');
    const metric = await t.deps.metrics.auditRejected.get();
    assert.equal(metric.values.find((v) => v.labels.event_type === 'made.up')?.value, 1);
    assert.ok(!AUDIT_EVENT_TYPES.has('made.up'));
  });

  it('redacts secret-looking metadata values', async () => {
    const tenantId = uuidv7();
    await t.deps.audit.record({
      type: 'user.password_changed',
      tenantId,
      actor: { kind: 'system' },
      metadata: { password: 'hunter22hunter22', nested: { api_key: 'pdk_x', ok: 1 } },
    });
    const [event] = (await t.deps.audit.list(tenantId, {})).data;
    assert.deepEqual(event?.metadata, { password: '[redacted]', nested: { api_key: '[redacted]', ok: 1 } });
  });

  it('commits with the caller transaction and rolls back with it', async () => {
    const tenantId = uuidv7();
    await t.deps.db
      .transaction()
      .execute(async (trx) => {
        await t.deps.audit.record({ type: 'auth.logout', tenantId, actor: { kind: 'system' } }, trx);
        throw new Error('abort');
      })
      .catch(() => {});
    assert.equal((await t.deps.audit.list(tenantId, {})).data.length, 0);
  });

  it('paginates newest first with an opaque cursor', async () => {
    const tenantId = uuidv7();
    for (let i = 0; i < 5; i++) {
      await t.deps.audit.record({
        type: 'auth.logout',
        tenantId,
        actor: { kind: 'system' },
        metadata: { i },
      });
    }
    const first = await t.deps.audit.list(tenantId, { limit: 2 });
    assert.deepEqual(
      first.data.map((e) => e.metadata['i']),
      [4, 3],
    );
    assert.equal(first.meta.has_more, true);
    const second = await t.deps.audit.list(tenantId, { limit: 2, cursor: first.meta.next_cursor! });
    assert.deepEqual(
      second.data.map((e) => e.metadata['i']),
      [2, 1],
    );
    const third = await t.deps.audit.list(tenantId, { limit: 2, cursor: second.meta.next_cursor! });
    assert.deepEqual(
      third.data.map((e) => e.metadata['i']),
      [0],
    );
    assert.deepEqual(third.meta, { next_cursor: null, has_more: false });
  });

  it('refuses UPDATE on audit rows (append-only)', async () => {
    await assert.rejects(sql`UPDATE audit_events SET type = 'x'`.execute(t.deps.db), /append-only/);
  });
});
