// The Conversation and Turn resources as the API shows them, and the bodies it accepts.
// Limits (docs/conversations.md): a prompt is 1 to 100,000 characters; at most 4 images per
// prompt, each PNG, JPEG, GIF or WebP of at most 5 MiB decoded; at most 50 MiB of prompts and
// images per conversation.
import { z } from 'zod';
import { PageMeta } from '../../accounts/accounts.schemas.ts';
import { text } from '../../resources/fields.ts';

export const PROMPT_MAX_CHARS = 100_000;
export const IMAGES_MAX = 4;
export const IMAGE_MAX_BYTES = 5 * 1024 * 1024;
export const IMAGE_MEDIA_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'] as const;
/**
 * Bytes of prompts and images (decoded) one conversation stores, kept until it is deleted: as
 * much as its log may hold (LOG_OUTPUT_BUDGET_MB's default), so a conversation stays within
 * about 100 MiB in all. That is two prompts with four images at their 5 MiB limit, or hundreds
 * of prompts with screenshots; a longer task starts a new conversation.
 */
export const CONVERSATION_INPUT_MAX_BYTES = 50 * 1024 * 1024;
/** Base64 of IMAGE_MAX_BYTES plus padding: longer text cannot decode within the limit. */
const IMAGE_MAX_BASE64_CHARS = Math.ceil(IMAGE_MAX_BYTES / 3) * 4;
/**
 * The request body bound of the prompt routes: four images at their limit (base64) plus the
 * largest prompt (4 bytes per character at worst) and some room for the JSON around them.
 */
export const PROMPT_BODY_LIMIT =
  IMAGES_MAX * (IMAGE_MAX_BASE64_CHARS + 64) + PROMPT_MAX_CHARS * 4 + 64 * 1024;

export const CONVERSATION_STATUSES = ['pending', 'running', 'idle', 'failed', 'terminated'] as const;
export const CONVERSATION_SOURCES = ['api', 'ui', 'cli', 'sandbox'] as const;
export const SANDBOX_STATUSES = ['pending', 'starting', 'ready', 'terminated', 'failed'] as const;
export const TURN_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'interrupted'] as const;

const Prompt = text(PROMPT_MAX_CHARS).refine((s) => s.trim().length > 0, 'must not be empty');

/**
 * Shape only here; the media type, count and decoded size are checked by the service
 * (images.ts), so every refusal is one 422 `errors.images` entry naming the image.
 */
export const ImageInput = z
  .object({
    media_type: z.string().max(100),
    // A little over the limit still reaches the service, so "too large" is one errors.images entry.
    data: z.string().max(IMAGE_MAX_BASE64_CHARS + 4096),
  })
  .strict();

export const PromptBody = z
  .object({
    prompt: Prompt,
    images: z.array(ImageInput).max(64).optional(),
  })
  .strict();

export const CreateConversationBody = z
  .object({
    agent_id: z.string().max(200),
    vault_id: z.string().max(200).nullable().optional(),
    prompt: Prompt,
    images: z.array(ImageInput).max(64).optional(),
  })
  .strict();

export const SandboxView = z.object({
  name: z.string(),
  status: z.enum(SANDBOX_STATUSES),
  reason: z.string().nullable(),
  created_at: z.string().nullable(),
  expires_at: z
    .string()
    .nullable()
    .describe('when the sandbox reaches SANDBOX_MAX_LIFETIME_HOURS (null: off, or the sandbox is gone)'),
  idle_expires_at: z
    .string()
    .nullable()
    .describe(
      'while the conversation is idle: when SANDBOX_IDLE_TIMEOUT_MINUTES without activity reclaims the sandbox',
    ),
});

export const ConversationView = z.object({
  id: z.string(),
  agent_id: z.string().nullable(),
  vault_id: z.string().nullable(),
  status: z.enum(CONVERSATION_STATUSES),
  source: z.enum(CONVERSATION_SOURCES),
  parent_conversation_id: z.string().nullable(),
  title: z.string(),
  unread: z.boolean(),
  failure_reason: z.string().nullable(),
  sandbox: SandboxView.nullable().describe('the latest sandbox of the conversation, if any'),
  created_at: z.string(),
  updated_at: z.string(),
  last_activity_at: z.string(),
  pull_requests: z
    .array(
      z.object({
        repo: z.string().describe("the repository's directory under /home/sandbox"),
        branch: z.string(),
        provider: z.enum(['github', 'gitlab']),
        number: z.number().int(),
        url: z.string(),
        created_at: z.string(),
      }),
    )
    .optional()
    .describe(
      'GET /api/conversations/:id only: the pull (merge) requests opened from it (POST …/push), oldest first',
    ),
});
export type ConversationView = z.infer<typeof ConversationView>;

export const TurnView = z.object({
  id: z.string(),
  seq: z.number().int(),
  status: z.enum(TURN_STATUSES),
  prompt: z.string(),
  runtime_session_id: z.string().nullable(),
  exit_code: z.number().int().nullable(),
  error: z.string().nullable(),
  usage: z.record(z.string(), z.number()).nullable(),
  created_at: z.string(),
  started_at: z.string().nullable(),
  ended_at: z.string().nullable(),
});
export type TurnView = z.infer<typeof TurnView>;

export const ConversationListQuery = z.object({
  status: z.enum(CONVERSATION_STATUSES).optional(),
  agent_id: z.uuid().optional(),
  parent_id: z.uuid().optional().describe('only the sub-conversations this conversation started'),
  limit: z.coerce.number().int().min(1).max(200).default(50),
  cursor: z.string().max(200).optional(),
});

export const ConversationPage = z.object({ data: z.array(ConversationView), meta: PageMeta });
export const IdParams = z.object({ id: z.string().max(200) });
