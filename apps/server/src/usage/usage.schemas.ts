import { z } from 'zod';

/** Checked by usage.service.ts (parseRange), which answers 400 invalid_query with what is wrong. */
export const UsageQuery = z.object({
  from: z
    .string()
    .optional()
    .describe(
      "ISO 8601 date or date-time (UTC when no offset); default: the start of to's month, or of this month",
    ),
  to: z
    .string()
    .optional()
    .describe(
      "ISO 8601 date or date-time, exclusive; default: the start of the month after from's, or after this one",
    ),
});

const Tokens = {
  input_tokens: z.number(),
  output_tokens: z.number(),
  cache_read_tokens: z.number(),
  cost_usd: z.number().nullable().describe('null when no turn reported a cost'),
};

export const UsageSummary = z.object({
  from: z.string(),
  to: z.string(),
  sandboxes: z.object({
    count: z.number().describe('sandbox lifetimes that ended in the range'),
    failed_before_ready: z.number(),
    busy_seconds: z.number().describe('time a turn was running in the sandbox'),
    parked_seconds: z.number().describe('time the sandbox was ready and idle'),
  }),
  turns: z.object({ count: z.number(), ...Tokens }),
  by_model: z.array(
    z.object({ runtime: z.string().nullable(), model: z.string().nullable(), turns: z.number(), ...Tokens }),
  ),
});

export type UsageSummaryT = z.infer<typeof UsageSummary>;
