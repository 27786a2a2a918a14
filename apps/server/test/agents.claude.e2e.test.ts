// Claude Code in a real sandbox, driven by the fake inference provider (Anthropic Messages over
// SSE), through the public API only: the story in helpers/agents-e2e-suite.ts.
import { describeAgentE2E } from './helpers/agents-e2e-suite.ts';

describeAgentE2E('claude', {
  missingCredential:
    /paddock: no Anthropic credential: set one with `paddock credentials set anthropic`, the console's Account page or PUT \/api\/account\/inference-credentials\/anthropic, or a secret ANTHROPIC_API_KEY in the agent's environment or vault/,
  bareError: () => 'API Error: 400 status code (no body)',
});
