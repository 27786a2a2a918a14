// Envelope encryption primitives. Pure functions over node:crypto; no I/O.
// The invariants these functions keep, and the tests that prove each, are in
// ./INVARIANTS.md. Read it before changing anything here.
import {
  createCipheriv,
  createDecipheriv,
  createHmac,
  hkdfSync,
  randomBytes,
  timingSafeEqual,
} from 'node:crypto';

const FORMAT_V1 = 0x01;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;

/** What a secret ciphertext is bound to. Every component has a fixed alphabet (uuid, enum, env-var name). */
export interface SecretBinding {
  tenantId: string;
  ownerKind: 'environment' | 'vault';
  ownerId: string;
  key: string;
}

/** Thrown when a ciphertext fails authentication: tampered, pasted from another row, or wrong key. */
export class DecryptionError extends Error {
  constructor(what: string) {
    super(`${what} failed authentication (tampered, moved from another row, or encrypted under another key)`);
    this.name = 'DecryptionError';
  }
}

/**
 * Identifies a master key without revealing it: HMAC-SHA256 keyed by the master key over a
 * fixed label, first 8 bytes in hex. Stored as tenant_keys.key_version so the right key can be
 * chosen during a rotation and a mismatched key is detected before any decryption is tried.
 */
export function masterKeyId(masterKey: Buffer): string {
  return createHmac('sha256', masterKey)
    .update('paddock/master-key-id/v1')
    .digest()
    .subarray(0, 8)
    .toString('hex');
}

export function generateDataKey(): Buffer {
  return randomBytes(KEY_BYTES);
}

function seal(key: Buffer, plaintext: Buffer, aad: Buffer): Buffer {
  if (key.length !== KEY_BYTES) throw new Error('AES-256-GCM needs a 32-byte key');
  const nonce = randomBytes(NONCE_BYTES);
  const cipher = createCipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
  cipher.setAAD(aad);
  const body = Buffer.concat([cipher.update(plaintext), cipher.final()]);
  return Buffer.concat([Buffer.of(FORMAT_V1), nonce, body, cipher.getAuthTag()]);
}

function open(key: Buffer, sealed: Buffer, aad: Buffer, what: string): Buffer {
  if (sealed.length < 1 + NONCE_BYTES + TAG_BYTES || sealed[0] !== FORMAT_V1) throw new DecryptionError(what);
  const nonce = sealed.subarray(1, 1 + NONCE_BYTES);
  const tag = sealed.subarray(sealed.length - TAG_BYTES);
  const body = sealed.subarray(1 + NONCE_BYTES, sealed.length - TAG_BYTES);
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, nonce, { authTagLength: TAG_BYTES });
    decipher.setAAD(aad);
    decipher.setAuthTag(tag);
    return Buffer.concat([decipher.update(body), decipher.final()]);
  } catch {
    throw new DecryptionError(what);
  }
}

function tenantKeyAad(tenantId: string): Buffer {
  return Buffer.from(`paddock/tenant-key/v1\0${tenantId}`, 'utf8');
}

function secretAad(b: SecretBinding): Buffer {
  return Buffer.from(`paddock/secret/v1\0${b.tenantId}\0${b.ownerKind}\0${b.ownerId}\0${b.key}`, 'utf8');
}

/** Wraps a tenant data key under the master key, bound to the tenant id. */
export function wrapDataKey(masterKey: Buffer, tenantId: string, dataKey: Buffer): Buffer {
  return seal(masterKey, dataKey, tenantKeyAad(tenantId));
}

export function unwrapDataKey(masterKey: Buffer, tenantId: string, wrapped: Buffer): Buffer {
  const key = open(masterKey, wrapped, tenantKeyAad(tenantId), 'tenant data key');
  if (key.length !== KEY_BYTES) throw new DecryptionError('tenant data key');
  return key;
}

export function encryptSecret(dataKey: Buffer, binding: SecretBinding, value: string): Buffer {
  return seal(dataKey, Buffer.from(value, 'utf8'), secretAad(binding));
}

export function decryptSecret(dataKey: Buffer, binding: SecretBinding, ciphertext: Buffer): string {
  return open(dataKey, ciphertext, secretAad(binding), `secret ${binding.key}`).toString('utf8');
}

/** What a sealed blob of a conversation (its runtime session state) is bound to. */
export interface ConversationBlobBinding {
  tenantId: string;
  conversationId: string;
  /** What the blob is, e.g. `session-state`: a blob of one kind cannot be opened as another. */
  purpose: 'session-state';
}

function conversationBlobAad(b: ConversationBlobBinding): Buffer {
  return Buffer.from(
    `paddock/conversation-blob/v1\0${b.tenantId}\0${b.conversationId}\0${b.purpose}`,
    'utf8',
  );
}

/** Seals a conversation's blob under the tenant key, bound to tenant, conversation and purpose. */
export function sealConversationBlob(
  dataKey: Buffer,
  binding: ConversationBlobBinding,
  plaintext: Buffer,
): Buffer {
  return seal(dataKey, plaintext, conversationBlobAad(binding));
}

export function openConversationBlob(
  dataKey: Buffer,
  binding: ConversationBlobBinding,
  sealed: Buffer,
): Buffer {
  return open(dataKey, sealed, conversationBlobAad(binding), binding.purpose);
}

/** What an account's inference credential (an API key) is bound to. */
export interface InferenceCredentialBinding {
  tenantId: string;
  /** anthropic | openai | gemini: a fixed alphabet, like every component of an AAD here. */
  provider: string;
}

function inferenceCredentialAad(b: InferenceCredentialBinding): Buffer {
  return Buffer.from(`paddock/inference-credential/v1\0${b.tenantId}\0${b.provider}`, 'utf8');
}

/** Seals an account's provider API key under the tenant key, bound to tenant and provider. */
export function sealInferenceCredential(
  dataKey: Buffer,
  binding: InferenceCredentialBinding,
  value: string,
): Buffer {
  return seal(dataKey, Buffer.from(value, 'utf8'), inferenceCredentialAad(binding));
}

export function openInferenceCredential(
  dataKey: Buffer,
  binding: InferenceCredentialBinding,
  sealed: Buffer,
): string {
  return open(dataKey, sealed, inferenceCredentialAad(binding), `${binding.provider} credential`).toString(
    'utf8',
  );
}

/**
 * Keyed MAC of a secret value, for "unchanged" detection without decrypting. The MAC key is
 * derived from the tenant data key (HKDF, separate label), so the MAC reveals nothing without
 * the wrapped key, and equal values in different rows give different MACs (binding included).
 */
export function secretValueMac(dataKey: Buffer, binding: SecretBinding, value: string): Buffer {
  const macKey = Buffer.from(
    hkdfSync('sha256', dataKey, Buffer.alloc(0), 'paddock/secret-mac/v1', KEY_BYTES),
  );
  return createHmac('sha256', macKey).update(secretAad(binding)).update('\0').update(value, 'utf8').digest();
}

export function macEquals(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}
