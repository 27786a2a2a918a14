// Gemini CLI in a real sandbox, driven by the fake inference provider (Gemini
// streamGenerateContent?alt=sse), through the public API only: the story in
// helpers/agents-e2e-suite.ts.
import { describeAgentE2E } from './helpers/agents-e2e-suite.ts';

describeAgentE2E('gemini', {
  missingCredential:
    /paddock: no Gemini credential: set one with `paddock credentials set gemini`, the console's Account page or PUT \/api\/account\/inference-credentials\/gemini, or a secret GEMINI_API_KEY in the agent's environment or vault/,
  bareError: () => 'the provider answered HTTP 400 Bad Request without an error message',
});
