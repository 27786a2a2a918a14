// opencode in a real sandbox, driven by the fake inference provider (Chat Completions over SSE,
// through an `@ai-sdk/openai-compatible` provider since the environment sets OPENAI_BASE_URL),
// through the public API only: the story in helpers/agents-e2e-suite.ts. opencode reports usage
// per step (model call): the turn's usage is their sum.
import { describeAgentE2E } from './helpers/agents-e2e-suite.ts';

describeAgentE2E('opencode', {
  usagePerStep: true,
  missingCredential:
    /paddock: no OpenAI credential for opencode: set one with `paddock credentials set openai`, the console's Account page or PUT \/api\/account\/inference-credentials\/openai, or a secret OPENAI_API_KEY in the agent's environment or vault/,
  bareError: (url) => `the provider answered HTTP 400 Bad Request without an error message (${url})`,
});
