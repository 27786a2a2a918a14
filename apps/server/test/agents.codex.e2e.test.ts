// Codex in a real sandbox, driven by the fake inference provider (OpenAI Responses over SSE,
// through Paddock's own `model_providers` entry), through the public API only: the story in
// helpers/agents-e2e-suite.ts. The second turn checks that the turn's usage is its own share of
// Codex's per-thread totals (runtimes/codex.ts invariant 4).
import { describeAgentE2E } from './helpers/agents-e2e-suite.ts';

describeAgentE2E('codex', {
  missingCredential:
    /paddock: no OpenAI credential for codex: set one with `paddock credentials set openai`, the console's Account page or PUT \/api\/account\/inference-credentials\/openai, or a secret OPENAI_API_KEY in the agent's environment or vault/,
  bareError: (url) => `the provider answered HTTP 400 Bad Request without an error message (${url})`,
});
