// The request and response schemas of a vault's secrets (secrets.routes.ts; apply's `secrets`
// maps take the same values). The field rules they build on are every resource's (resources/fields.ts).
import { z } from 'zod';
import { envVarName, STORABLE_MESSAGE, storable, timestamps } from '../resources/fields.ts';

export const SECRET_VALUE_MAX_BYTES = 64 * 1024;

export const secretValue = z
  .string()
  .refine(storable, STORABLE_MESSAGE)
  .refine((v) => Buffer.byteLength(v, 'utf8') <= SECRET_VALUE_MAX_BYTES, `must be at most 64 KiB`);

export const SecretView = z.object({
  id: z.string(),
  key: z.string(),
  ...timestamps,
});

export const SecretUpsertBody = z
  .object({
    key: envVarName,
    value: secretValue,
  })
  .strict();

export const SecretKeyParams = z.object({ id: z.string().max(200), key: z.string().max(200) });
