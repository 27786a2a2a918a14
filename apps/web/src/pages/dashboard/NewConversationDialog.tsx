// "New conversation": agent, an optional vault from the agent's allowlist, the prompt and up
// to four images. Opened from anywhere with `n` (app/Shell.tsx). The server checks it all
// again (docs/api.md, Conversations); the checks here only save a round trip.
// What must hold (apps/web/test/new-conversation.browser.test.ts): the prompt has the focus
// when the dialog opens; the agent is the one this browser last started a conversation with,
// or the only one; with several and none remembered, nothing is chosen for the person (a
// wrong agent would run their prompt) and starting waits for a choice. An agent whose turns
// would have no provider key (with the chosen vault) is said before it starts.
import { type FormEvent, useEffect, useId, useMemo, useRef, useState } from 'react';
import { ApiError, api } from '../../api/client';
import { type Agent, useAgents, useVaults } from '../../api/resources';
import { useApi } from '../../api/use-api';
import { navigate } from '../../app/router';
import { Dialog } from '../../ui/Dialog';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { KeylessNotice, keyless } from '../../ui/KeylessNotice';
import { ImagePicker, type PickedImage } from './ImagePicker';

const LAST_AGENT_KEY = 'paddock.lastAgent';

function lastAgentId(): string | null {
  try {
    return localStorage.getItem(LAST_AGENT_KEY);
  } catch {
    return null;
  }
}

function rememberAgent(id: string): void {
  try {
    localStorage.setItem(LAST_AGENT_KEY, id);
  } catch {
    // Storage refused (private mode): the next dialog asks again.
  }
}

/** The agent chosen when the dialog opens: the remembered one if it still exists, else the only one. */
function initialAgent(agents: readonly Agent[]): Agent | undefined {
  const last = lastAgentId();
  return agents.find((a) => a.id === last) ?? (agents.length === 1 ? agents[0] : undefined);
}

export default function NewConversationDialog({ onClose }: { onClose: () => void }) {
  const agents = useAgents();
  const vaults = useVaults();
  // null until the person picks one; then the pick wins over the initial choice.
  const [agentId, setAgentId] = useState<string | null>(null);
  const [vaultId, setVaultId] = useState('');
  const [prompt, setPrompt] = useState('');
  const [images, setImages] = useState<PickedImage[]>([]);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const ids = { agent: useId(), vault: useId(), prompt: useId() };
  const agentRef = useRef<HTMLSelectElement>(null);
  const promptRef = useRef<HTMLTextAreaElement>(null);

  // After the Dialog's showModal (a child's effect runs first), which focuses the first
  // focusable element, the close button: the prompt is what the person came to write.
  useEffect(() => {
    promptRef.current?.focus();
  }, []);

  const agent = agents.data
    ? agentId === null
      ? initialAgent(agents.data)
      : agents.data.find((a) => a.id === agentId)
    : undefined;
  const mustChoose = agents.data !== undefined && agent === undefined;
  const allowed = useMemo(
    () => (vaults.data ?? []).filter((v) => agent?.vault_ids.includes(v.id)),
    [vaults.data, agent],
  );
  const fieldErrors = error instanceof ApiError ? error.body.errors : undefined;
  const chosenVault = vaultId && allowed.some((v) => v.id === vaultId) ? vaultId : '';
  const credential = useApi(
    (signal) =>
      agent
        ? api.get('/api/agents/{id}/credential', {
            path: { id: agent.id },
            query: chosenVault ? { vault_id: chosenVault } : {},
            signal,
          })
        : Promise.resolve(null),
    [agent?.id, chosenVault],
  );
  const missingKey = keyless(credential.data);

  const submit = async (event?: FormEvent) => {
    event?.preventDefault();
    if (!agent) {
      agentRef.current?.focus();
      return;
    }
    if (busy) return;
    setBusy(true);
    setError(null);
    try {
      const created = await api.post('/api/conversations', {
        body: {
          agent_id: agent.id,
          ...(chosenVault ? { vault_id: chosenVault } : {}),
          prompt,
          ...(images.length ? { images: images.map(({ media_type, data }) => ({ media_type, data })) } : {}),
        },
      });
      rememberAgent(agent.id);
      onClose();
      navigate(`/conversations/${created.id}`);
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  };

  return (
    <Dialog open onClose={onClose} title="New conversation" wide>
      {agents.data && agents.data.length === 0 ? (
        <div className="stack">
          <p>
            A conversation runs an <strong>agent</strong>. This account has none yet: create one first (under
            Configuration, or with <code>POST /api/agents</code> or <code>paddock apply</code>).
          </p>
        </div>
      ) : (
        <form className="stack" onSubmit={submit}>
          <ErrorNotice error={error} />
          <div className="grid-2">
            <div className="field">
              <label htmlFor={ids.agent}>Agent</label>
              <select
                id={ids.agent}
                ref={agentRef}
                required
                value={agent?.id ?? ''}
                onChange={(e) => {
                  setAgentId(e.target.value);
                  setVaultId('');
                }}
                disabled={!agents.data}
                aria-describedby={mustChoose ? `${ids.agent}-hint` : undefined}
              >
                {!agent && (
                  <option value="" disabled>
                    Choose an agent…
                  </option>
                )}
                {(agents.data ?? []).map((a) => (
                  <option key={a.id} value={a.id}>
                    {a.name} ({a.runtime})
                  </option>
                ))}
              </select>
              {agent?.description && <p className="field-hint">{agent.description}</p>}
              {mustChoose && (
                <p id={`${ids.agent}-hint`} className="field-hint">
                  Which agent runs this prompt? The next conversation starts with the one you choose.
                </p>
              )}
            </div>
            <div className="field">
              <label htmlFor={ids.vault}>Vault</label>
              <select
                id={ids.vault}
                value={vaultId}
                onChange={(e) => setVaultId(e.target.value)}
                disabled={allowed.length === 0}
                aria-describedby={`${ids.vault}-hint`}
              >
                <option value="">No vault</option>
                {allowed.map((v) => (
                  <option key={v.id} value={v.id}>
                    {v.name}
                  </option>
                ))}
              </select>
              <p id={`${ids.vault}-hint`} className="field-hint">
                {allowed.length === 0
                  ? 'This agent allows no vault.'
                  : 'Secret overrides from the vaults this agent allows.'}
              </p>
            </div>
          </div>
          <div className="field">
            <label htmlFor={ids.prompt}>Prompt</label>
            <textarea
              id={ids.prompt}
              ref={promptRef}
              required
              rows={6}
              maxLength={100_000}
              value={prompt}
              placeholder="What should the agent do?"
              onChange={(e) => setPrompt(e.target.value)}
              onKeyDown={(e) => {
                if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
                  e.preventDefault();
                  void submit();
                }
              }}
              aria-invalid={fieldErrors?.['prompt'] ? true : undefined}
            />
            <p className="field-hint">
              <kbd>Ctrl</kbd>+<kbd>Enter</kbd> starts it.
              {fieldErrors?.['prompt'] && (
                <span className="field-error"> {fieldErrors['prompt'].join('; ')}</span>
              )}
            </p>
          </div>
          <ImagePicker images={images} onChange={setImages} errors={fieldErrors?.['images']} />
          {missingKey && <KeylessNotice missing={missingKey} where="the vault you choose" />}
          <div className="dialog-actions">
            <button type="button" className="btn" onClick={onClose}>
              Cancel
            </button>
            <button type="submit" className="btn btn-primary" disabled={busy || !agent || !prompt.trim()}>
              {busy ? 'Starting…' : 'Start conversation'}
            </button>
          </div>
        </form>
      )}
    </Dialog>
  );
}
