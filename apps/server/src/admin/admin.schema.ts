// The admin's cross-tenant views: metadata only. No field here carries content — no prompt,
// title, log text, failure message, secret or runtime state (admin.repo.ts never reads them).
import { z } from 'zod';
import { PageMeta, UserView } from '../accounts/accounts.schemas.ts';

export const AdminUserDetail = z.object({
  user: UserView,
  counts: z.object({
    environments: z.number().int(),
    vaults: z.number().int(),
    agents: z.number().int(),
    conversations: z.number().int(),
    active_api_keys: z.number().int(),
  }),
  last_activity_at: z.string().nullable().describe("latest activity of the account's conversations"),
});

export const AdminConversation = z.object({
  id: z.string(),
  tenant_id: z.string(),
  agent_id: z.string().nullable(),
  agent_name: z.string().nullable(),
  runtime: z.string().nullable(),
  vault_id: z.string().nullable(),
  status: z.string(),
  source: z.string(),
  parent_conversation_id: z.string().nullable(),
  turn_count: z.number().int(),
  log_bytes: z.number().int(),
  log_truncated: z.boolean(),
  created_at: z.string(),
  last_activity_at: z.string(),
});

export const AdminConversationPage = z.object({ data: z.array(AdminConversation), meta: PageMeta });

export const AdminConversationDetail = AdminConversation.extend({
  owner_email: z.string().nullable(),
  sandbox: z
    .object({
      status: z.string(),
      created_at: z.string(),
      ready_at: z.string().nullable(),
      ended_at: z.string().nullable(),
    })
    .nullable(),
  turns: z.array(
    z.object({
      seq: z.number().int(),
      status: z.string(),
      exit_code: z.number().int().nullable(),
      usage: z
        .object({
          input_tokens: z.number().optional(),
          output_tokens: z.number().optional(),
          cache_read_tokens: z.number().optional(),
          cost_usd: z.number().optional(),
        })
        .nullable(),
      created_at: z.string(),
      started_at: z.string().nullable(),
      ended_at: z.string().nullable(),
    }),
  ),
});

export type AdminUserDetailT = z.infer<typeof AdminUserDetail>;
export type AdminConversationT = z.infer<typeof AdminConversation>;
export type AdminConversationDetailT = z.infer<typeof AdminConversationDetail>;

/** What the sandbox reaper's last full listing found that no row knows: names only (reported, never destroyed). */
export const UntrackedSandboxes = z.object({
  data: z.array(
    z.object({
      name: z.string(),
      first_seen_at: z.string().describe('the first reaper run that found it'),
      last_seen_at: z.string().describe('the last reaper run that found it'),
    }),
  ),
});
export type UntrackedSandboxesT = z.infer<typeof UntrackedSandboxes>;
