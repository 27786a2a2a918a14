// Proves the invariants of ./INVARIANTS.md against a real PostgreSQL.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { v7 as uuidv7 } from 'uuid';
import { buildTestApp, type TestApp } from '../../test/helpers/app.ts';
import { createTestDatabase, type TestDatabase } from '../../test/helpers/database.ts';
import { createVerifiedUser } from '../../test/helpers/factories.ts';
import type { Db } from '../db/database.ts';
import { AppError } from '../http/errors.ts';
import { TASKS } from '../tasks/tasks.ts';
import {
  DecryptionError,
  decryptSecret,
  encryptSecret,
  generateDataKey,
  masterKeyId,
  type SecretBinding,
  unwrapDataKey,
  wrapDataKey,
} from './envelope.ts';
import { createSecretsService, type SecretsService } from './secrets.service.ts';

const key = () => randomBytes(32);
const b64 = (k: Buffer) => k.toString('base64url');

describe('envelope primitives', () => {
  const dek = generateDataKey();
  const binding: SecretBinding = {
    tenantId: uuidv7(),
    ownerKind: 'environment',
    ownerId: uuidv7(),
    key: 'API_TOKEN',
  };

  it('round-trips and encrypts the same value to different ciphertexts (fresh nonce)', () => {
    const a = encryptSecret(dek, binding, 'hunter2');
    const b = encryptSecret(dek, binding, 'hunter2');
    assert.notDeepEqual(a, b);
    assert.equal(decryptSecret(dek, binding, a), 'hunter2');
    assert.equal(decryptSecret(dek, binding, b), 'hunter2');
    assert.ok(!a.includes(Buffer.from('hunter2')));
  });

  it('rejects tampered ciphertext: a flipped bit anywhere fails authentication', () => {
    const sealed = encryptSecret(dek, binding, 'some secret value');
    for (let i = 0; i < sealed.length; i++) {
      const copy = Buffer.from(sealed);
      copy[i] = (copy[i] ?? 0) ^ 0x01;
      assert.throws(() => decryptSecret(dek, binding, copy), DecryptionError, `byte ${i}`);
    }
    assert.throws(() => decryptSecret(dek, binding, sealed.subarray(0, 20)), DecryptionError);
    assert.throws(() => decryptSecret(dek, binding, Buffer.alloc(0)), DecryptionError);
  });

  it('rejects a ciphertext under another binding (key name, owner, owner kind, tenant) or another key', () => {
    const sealed = encryptSecret(dek, binding, 'v');
    for (const other of [
      { ...binding, key: 'OTHER' },
      { ...binding, ownerId: uuidv7() },
      { ...binding, ownerKind: 'vault' as const },
      { ...binding, tenantId: uuidv7() },
    ]) {
      assert.throws(() => decryptSecret(dek, other, sealed), DecryptionError);
    }
    assert.throws(() => decryptSecret(generateDataKey(), binding, sealed), DecryptionError);
  });

  it('binds a wrapped tenant key to its tenant and master key', () => {
    const master = key();
    const tenant = uuidv7();
    const wrapped = wrapDataKey(master, tenant, dek);
    assert.deepEqual(unwrapDataKey(master, tenant, wrapped), dek);
    assert.throws(() => unwrapDataKey(master, uuidv7(), wrapped), DecryptionError);
    assert.throws(() => unwrapDataKey(key(), tenant, wrapped), DecryptionError);
  });

  it('identifies a master key by a stable fingerprint that is not the key', () => {
    const master = key();
    assert.equal(masterKeyId(master), masterKeyId(Buffer.from(master)));
    assert.notEqual(masterKeyId(master), masterKeyId(key()));
    assert.match(masterKeyId(master), /^[0-9a-f]{16}$/);
    assert.ok(!b64(master).includes(masterKeyId(master)));
  });
});

describe('secrets service on PostgreSQL', () => {
  let database: TestDatabase;
  let t: TestApp;
  let db: Db;
  const masterA = key();
  const masterB = key();

  const service = (masterKey: Buffer, previousMasterKey?: Buffer): SecretsService =>
    createSecretsService({ db, logger: t.deps.logger, audit: t.deps.audit, masterKey, previousMasterKey });

  const newEnvironment = async (tenantId: string, name = `env-${randomBytes(3).toString('hex')}`) => {
    const id = uuidv7();
    await db
      .insertInto('environments')
      .values({
        id,
        tenant_id: tenantId,
        name,
        env_vars: '{}',
        packages: '{}',
        repos: '[]',
        networking_type: 'unrestricted',
        networking_config: '{"allowed_hosts":[]}',
        metadata: '{}',
      })
      .execute();
    return { kind: 'environment' as const, id };
  };

  before(async () => {
    database = await createTestDatabase();
    t = await buildTestApp({ database, env: { MASTER_SECRETS_KEY: b64(masterA) } });
    db = t.deps.db;
  });
  after(async () => {
    await t.close();
    await database.drop();
  });

  it('creates one tenant key, idempotently, under concurrency', async () => {
    const user = await createVerifiedUser(db);
    const s = service(masterA);
    await Promise.all(Array.from({ length: 8 }, () => s.ensureTenantKey(user.id)));
    const rows = await db.selectFrom('tenant_keys').selectAll().where('tenant_id', '=', user.id).execute();
    assert.equal(rows.length, 1);
    const before = rows[0]!.wrapped_key;
    await s.ensureTenantKey(user.id);
    const again = await db
      .selectFrom('tenant_keys')
      .selectAll()
      .where('tenant_id', '=', user.id)
      .executeTakeFirstOrThrow();
    assert.deepEqual(again.wrapped_key, before);
  });

  it('stores only a fingerprint of the master key', async () => {
    const user = await createVerifiedUser(db);
    await service(masterA).ensureTenantKey(user.id);
    const row = await db
      .selectFrom('tenant_keys')
      .selectAll()
      .where('tenant_id', '=', user.id)
      .executeTakeFirstOrThrow();
    assert.equal(row.key_version, masterKeyId(masterA));
    assert.ok(!row.wrapped_key.includes(masterA));
  });

  it('encrypts values, detects unchanged values with the keyed MAC, and merges vault over environment', async () => {
    const user = await createVerifiedUser(db);
    const s = service(masterA);
    const env = await newEnvironment(user.id);
    assert.equal((await s.upsert(user.id, env, 'TOKEN', 'env-value')).outcome, 'created');
    assert.equal((await s.upsert(user.id, env, 'TOKEN', 'env-value')).outcome, 'unchanged');
    assert.equal((await s.upsert(user.id, env, 'TOKEN', 'env-value-2')).outcome, 'updated');
    await s.upsert(user.id, env, 'ONLY_ENV', 'e');
    const vaultId = uuidv7();
    await db
      .insertInto('vaults')
      .values({ id: vaultId, tenant_id: user.id, name: 'v', metadata: '{}' })
      .execute();
    await s.upsert(user.id, { kind: 'vault', id: vaultId }, 'TOKEN', 'vault-value');
    const merged = await s.mergedEnv(user.id, {
      envVars: { TOKEN: 'plain', PLAIN: 'p' },
      environmentId: env.id,
      vaultId,
    });
    assert.deepEqual(merged, { TOKEN: 'vault-value', ONLY_ENV: 'e', PLAIN: 'p' });
    const raw = await db
      .selectFrom('secrets')
      .select(['ciphertext', 'value_mac'])
      .where('tenant_id', '=', user.id)
      .execute();
    for (const r of raw) {
      for (const plain of ['env-value-2', 'vault-value']) {
        assert.ok(!r.ciphertext.includes(Buffer.from(plain)));
        assert.ok(!r.value_mac.includes(Buffer.from(plain)));
      }
    }
  });

  it('rejects a ciphertext pasted into another row or tenant', async () => {
    const alice = await createVerifiedUser(db);
    const bob = await createVerifiedUser(db);
    const s = service(masterA);
    const envA1 = await newEnvironment(alice.id);
    const envA2 = await newEnvironment(alice.id);
    const envB = await newEnvironment(bob.id);
    await s.upsert(alice.id, envA1, 'TOKEN', 'alice-secret');
    await s.upsert(alice.id, envA1, 'OTHER', 'other');
    await s.upsert(alice.id, envA2, 'TOKEN', 'placeholder');
    await s.upsert(bob.id, envB, 'TOKEN', 'placeholder');
    const source = await db
      .selectFrom('secrets')
      .select('ciphertext')
      .where('environment_id', '=', envA1.id)
      .where('key', '=', 'TOKEN')
      .executeTakeFirstOrThrow();
    const paste = (envId: string, k: string) =>
      db
        .updateTable('secrets')
        .set({ ciphertext: source.ciphertext })
        .where('environment_id', '=', envId)
        .where('key', '=', k)
        .execute();
    await paste(envA1.id, 'OTHER'); // same owner, other key name
    await paste(envA2.id, 'TOKEN'); // same key name, other owner
    await paste(envB.id, 'TOKEN'); // other tenant
    await assert.rejects(s.decryptOwner(alice.id, envA1), DecryptionError);
    await assert.rejects(s.decryptOwner(alice.id, envA2), DecryptionError);
    await assert.rejects(s.decryptOwner(bob.id, envB), DecryptionError);
  });

  it('rejects tampered ciphertext stored in the database', async () => {
    const user = await createVerifiedUser(db);
    const s = service(masterA);
    const env = await newEnvironment(user.id);
    await s.upsert(user.id, env, 'TOKEN', 'value');
    const row = await db
      .selectFrom('secrets')
      .select(['id', 'ciphertext'])
      .where('environment_id', '=', env.id)
      .executeTakeFirstOrThrow();
    const tampered = Buffer.from(row.ciphertext);
    tampered[tampered.length - 20] = (tampered[tampered.length - 20] ?? 0) ^ 0xff;
    await db.updateTable('secrets').set({ ciphertext: tampered }).where('id', '=', row.id).execute();
    await assert.rejects(s.decryptOwner(user.id, env), DecryptionError);
  });

  it('fails clearly with a wrong master key and writes nothing', async () => {
    const user = await createVerifiedUser(db);
    const env = await newEnvironment(user.id);
    await service(masterA).upsert(user.id, env, 'TOKEN', 'original');
    const snapshot = async () => ({
      keys: await db.selectFrom('tenant_keys').selectAll().where('tenant_id', '=', user.id).execute(),
      secrets: await db.selectFrom('secrets').selectAll().where('tenant_id', '=', user.id).execute(),
    });
    const before = await snapshot();
    const wrong = service(key());
    for (const attempt of [
      () => wrong.upsert(user.id, env, 'TOKEN', 'overwrite'),
      () => wrong.upsert(user.id, env, 'NEW_KEY', 'new'),
      () => wrong.decryptOwner(user.id, env),
    ]) {
      await assert.rejects(attempt(), (err: unknown) => {
        assert.ok(err instanceof AppError);
        assert.equal(err.status, 503);
        assert.match(err.message, /MASTER_SECRETS_KEY does not match/);
        return true;
      });
    }
    await wrong.ensureTenantKey(user.id); // never replaces an existing key
    assert.deepEqual(await snapshot(), before);
    // Listing keys needs no decryption and keeps working.
    assert.deepEqual(
      (await wrong.list(user.id, env)).map((s) => s.key),
      ['TOKEN'],
    );
    // The right key still reads the original value.
    assert.deepEqual(await service(masterA).decryptOwner(user.id, env), { TOKEN: 'original' });
  });

  it('rotates the master key: previous key readable until the task runs, rewrap idempotent, per-tenant', async () => {
    const rotationDb = await createTestDatabase();
    const oldApp = await buildTestApp({ database: rotationDb, env: { MASTER_SECRETS_KEY: b64(masterA) } });
    const users = await Promise.all(Array.from({ length: 5 }, () => createVerifiedUser(oldApp.deps.db)));
    const envs = [];
    for (const u of users) {
      const res = await oldApp.app.inject({
        method: 'POST',
        url: '/api/environments',
        headers: u.auth,
        payload: { name: 'e' },
      });
      assert.equal(res.statusCode, 201);
      const id = res.json().id as string;
      envs.push({ kind: 'environment' as const, id });
      await oldApp.deps.secrets.upsert(u.id, { kind: 'environment', id }, 'TOKEN', `value-of-${u.id}`);
    }
    await oldApp.close();

    const rotated = await buildTestApp({
      database: rotationDb,
      env: { MASTER_SECRETS_KEY: b64(masterB), MASTER_SECRETS_KEY_PREVIOUS: b64(masterA) },
    });
    try {
      // Before the task: keys wrapped by the previous key still decrypt.
      assert.deepEqual(await rotated.deps.secrets.decryptOwner(users[0]!.id, envs[0]!), {
        TOKEN: `value-of-${users[0]!.id}`,
      });
      // One tenant wrapped by an unknown key: reported and left untouched.
      const stranger = await createVerifiedUser(rotated.deps.db);
      await createSecretsService({
        db: rotated.deps.db,
        logger: rotated.deps.logger,
        audit: rotated.deps.audit,
        masterKey: key(),
      }).ensureTenantKey(stranger.id);
      const strangerRow = await rotated.deps.db
        .selectFrom('tenant_keys')
        .selectAll()
        .where('tenant_id', '=', stranger.id)
        .executeTakeFirstOrThrow();

      const lines: string[] = [];
      await assert.rejects(
        TASKS['rotate-master-key']!.run({
          deps: rotated.deps,
          args: ['--batch-size', '2'],
          print: (l) => lines.push(l),
        }),
        /wrapped by neither/,
      );
      assert.ok(
        lines.some((l) => l.includes('rewrapped 5 tenant key(s); 1 wrapped by an unknown key')),
        lines.join('\n'),
      );
      const versions = await rotated.deps.db
        .selectFrom('tenant_keys')
        .select(['tenant_id', 'key_version'])
        .execute();
      for (const v of versions) {
        assert.equal(
          v.key_version,
          v.tenant_id === stranger.id ? strangerRow.key_version : masterKeyId(masterB),
        );
      }
      const audited = await rotated.deps.db
        .selectFrom('audit_events')
        .select('tenant_id')
        .where('type', '=', 'tenant_key.rotated')
        .execute();
      assert.equal(audited.length, 5);
      // Idempotent: a second run rewraps nothing.
      assert.deepEqual(await rotated.deps.secrets.rotateMasterKey(), { rewrapped: 0, unmatched: 1 });

      // After rotation only the new key is needed; the old one alone fails clearly.
      const onlyNew = createSecretsService({
        db: rotated.deps.db,
        logger: rotated.deps.logger,
        audit: rotated.deps.audit,
        masterKey: masterB,
      });
      const onlyOld = createSecretsService({
        db: rotated.deps.db,
        logger: rotated.deps.logger,
        audit: rotated.deps.audit,
        masterKey: masterA,
      });
      for (const [i, u] of users.entries()) {
        assert.deepEqual(await onlyNew.decryptOwner(u.id, envs[i]!), { TOKEN: `value-of-${u.id}` });
        await assert.rejects(
          onlyOld.decryptOwner(u.id, envs[i]!),
          (e: unknown) => e instanceof AppError && e.status === 503,
        );
      }
      // No master key material in the log lines.
      const logText = rotated.logs.join('');
      for (const k of [masterA, masterB]) {
        assert.ok(!logText.includes(b64(k)));
        assert.ok(!logText.includes(k.toString('hex')));
      }
    } finally {
      await rotated.close();
      await rotationDb.drop();
    }
  });
  it('verify-secrets decrypts every secret and writes nothing; a tampered secret or a wrong key fails it', async () => {
    const verifyDb = await createTestDatabase();
    const app = await buildTestApp({ database: verifyDb, env: { MASTER_SECRETS_KEY: b64(masterA) } });
    try {
      const users = [await createVerifiedUser(app.deps.db), await createVerifiedUser(app.deps.db)];
      for (const u of users) {
        for (const path of ['/api/environments', '/api/vaults']) {
          const res = await app.app.inject({
            method: 'POST',
            url: path,
            headers: u.auth,
            payload: { name: 'x' },
          });
          assert.equal(res.statusCode, 201, res.body);
          for (const k of ['A', 'B']) {
            const put = await app.app.inject({
              method: 'POST',
              url: `${path}/${res.json().id}/secrets`,
              headers: u.auth,
              payload: { key: k, value: `value-${k}-${u.id}` },
            });
            assert.equal(put.statusCode, 201, put.body);
          }
        }
      }
      await createVerifiedUser(app.deps.db); // an account without a tenant key: verify creates none
      const snapshot = async () => ({
        keys: await app.deps.db.selectFrom('tenant_keys').selectAll().orderBy('tenant_id').execute(),
        secrets: await app.deps.db.selectFrom('secrets').selectAll().orderBy('id').execute(),
      });
      const before = await snapshot();
      const run = async (deps: TestApp['deps']) => {
        const lines: string[] = [];
        const result = await TASKS['verify-secrets']!.run({
          deps,
          args: ['--batch-size', '1'],
          print: (l) => lines.push(l),
        }).then(
          () => null,
          (err: unknown) => err,
        );
        return { lines, result };
      };

      const ok = await run(app.deps);
      assert.equal(ok.result, null);
      assert.deepEqual(ok.lines, [
        'verified 2 tenant key(s) and 8 secret(s); 0 tenant key(s) and 0 secret(s) unreadable',
      ]);
      assert.deepEqual(await snapshot(), before);

      const wrongKey = key();
      const wrong = await buildTestApp({ database: verifyDb, env: { MASTER_SECRETS_KEY: b64(wrongKey) } });
      try {
        const bad = await run(wrong.deps);
        assert.ok(bad.result instanceof Error);
        assert.match(
          bad.result.message,
          /2 tenant key\(s\) cannot be unwrapped and 8 secret\(s\) cannot be decrypted/,
        );
        assert.deepEqual(bad.lines, [
          'verified 0 tenant key(s) and 0 secret(s); 2 tenant key(s) and 8 secret(s) unreadable',
        ]);
        const logText = wrong.logs.join('');
        assert.match(logText, /wrapped by a master key that is not configured/);
        for (const k of [masterA, wrongKey]) assert.ok(!logText.includes(b64(k)));
        for (const u of users) assert.ok(!logText.includes(`value-A-${u.id}`));
      } finally {
        await wrong.close();
      }
      assert.deepEqual(await snapshot(), before);

      // One tampered ciphertext: that secret alone is unreadable.
      const victim = before.secrets[0]!;
      const tampered = Buffer.from(victim.ciphertext);
      tampered[tampered.length - 1] = (tampered[tampered.length - 1] ?? 0) ^ 0x01;
      await app.deps.db
        .updateTable('secrets')
        .set({ ciphertext: tampered })
        .where('id', '=', victim.id)
        .execute();
      const one = await run(app.deps);
      assert.ok(one.result instanceof Error);
      assert.deepEqual(one.lines, [
        'verified 2 tenant key(s) and 7 secret(s); 0 tenant key(s) and 1 secret(s) unreadable',
      ]);
    } finally {
      await app.close();
      await verifyDb.drop();
    }
  });
});
