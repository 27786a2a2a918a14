// Request and response schemas of the accounts API (validation + OpenAPI).
import { z } from 'zod';

export const Email = z.email().max(254);
/** The policy (8..256 characters, not common) is enforced by the service with a 422; this bound only stops abuse. */
export const PasswordInput = z.string().min(1).max(1024);
export const TokenInput = z.string().min(1).max(512);
/** Password reset and change: also revoke every API key (by default keys, being integrations, survive). */
export const RevokeApiKeys = z.boolean().optional();

export const UserView = z.object({
  id: z.uuid(),
  email: z.string(),
  email_verified: z.boolean(),
  is_admin: z.boolean(),
  suspended: z.boolean(),
  created_at: z.string(),
});

export const MeView = UserView.extend({
  has_password: z.boolean(),
  subscription_status: z.enum(['trialing', 'active', 'past_due', 'canceled', 'comped']).nullable(),
  // The billing fields exist only with BILLING_ENABLED (spec: billing off, no trial or subscription state).
  trial_ends_at: z.string().nullable().optional().describe('billing on only'),
  current_period_end: z.string().nullable().optional().describe('billing on only'),
  cancel_at_period_end: z.boolean().optional().describe('billing on only'),
  auth: z.object({ via: z.enum(['api_key', 'session']), scope: z.enum(['full', 'conversation']) }),
});

export const ApiKeyView = z.object({
  id: z.uuid(),
  name: z.string(),
  prefix: z.string(),
  scope: z.enum(['full', 'conversation']),
  conversation_id: z.string().nullable(),
  created_at: z.string(),
  last_used_at: z.string().nullable(),
  expires_at: z.string().nullable(),
});

export const CreatedApiKey = ApiKeyView.extend({ key: z.string() });

export const Message = z.object({ message: z.string() });

export const ExpiresInDays = z.number().int().min(1).max(3650).nullable().optional();
export const KeyName = z.string().trim().min(1).max(100);

export const PageQuery = z.object({
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: z.string().max(200).optional(),
});

export const PageMeta = z.object({ next_cursor: z.string().nullable(), has_more: z.boolean() });
