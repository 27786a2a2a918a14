// The Vault resource: a named bag of secret overrides plus metadata.
import { z } from 'zod';
import { metadata, resourceName, timestamps } from '../resources/fields.ts';

/** Every mutable field. PUT replaces all of them. */
export const VaultBody = z
  .object({
    name: resourceName,
    metadata: metadata.default({}),
  })
  .strict();

export type VaultInput = z.output<typeof VaultBody>;

export const VaultView = z.object({
  id: z.string(),
  name: z.string(),
  metadata: z.record(z.string(), z.unknown()),
  secret_count: z.number().int(),
  agent_count: z.number().int().describe('agents whose vault allowlist names this vault'),
  ...timestamps,
});

export type VaultViewT = z.infer<typeof VaultView>;
