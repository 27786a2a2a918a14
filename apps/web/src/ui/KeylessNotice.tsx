// "This agent's turns have no provider key": said where a person can still fix it before a
// turn fails (the conversation page, the New conversation dialog, the agent form). The answer
// comes from GET /api/agents/:id/credential or GET /api/account/inference-credentials/check:
// names only, never a value.
import { Link } from '../app/router';

const PROVIDER_LABELS: Record<string, string> = {
  anthropic: 'Anthropic',
  openai: 'OpenAI',
  gemini: 'Gemini',
};

export interface CredentialSource {
  provider: string | null;
  key_var: string | null;
  source: string | null;
}

/** The answer when the turns would have no key; null when they have one or the runtime needs none known here. */
export function keyless(answer: CredentialSource | null | undefined): CredentialSource | null {
  return answer?.provider && answer.source === null ? answer : null;
}

/** `where`: what else could hold the key beside the account ("this conversation's vault", "a vault"). */
export function KeylessNotice({ missing, where }: { missing: CredentialSource; where: string }) {
  const label = PROVIDER_LABELS[missing.provider ?? ''] ?? missing.provider;
  return (
    <div className="notice notice-warn" role="note" data-keyless={missing.provider ?? ''}>
      No {label} key for this agent: its turns fail at once. Set one on{' '}
      <Link href="/account">the Account page</Link>, or a secret {missing.key_var} in the agent's environment
      or {where}.
    </div>
  );
}
