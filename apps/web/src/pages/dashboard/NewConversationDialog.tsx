// "New conversation": agent, an optional vault from the agent's allowlist, the prompt and up
// to four images. Opened from anywhere with `n` (app/Shell.tsx). The server checks it all
// again (docs/api.md, Conversations); the checks here only save a round trip.
import { type FormEvent, useId, useMemo, useState } from 'react';
import { ApiError, api } from '../../api/client';
import { useAgents, useVaults } from '../../api/resources';
import { navigate } from '../../app/router';
import { Dialog } from '../../ui/Dialog';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { ImagePicker, type PickedImage } from './ImagePicker';

export default function NewConversationDialog({ onClose }: { onClose: () => void }) {
  const agents = useAgents();
  const vaults = useVaults();
  const [agentId, setAgentId] = useState('');
  const [vaultId, setVaultId] = useState('');
  const [prompt, setPrompt] = useState('');
  const [images, setImages] = useState<PickedImage[]>([]);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const ids = { agent: useId(), vault: useId(), prompt: useId() };

  const agent = agents.data?.find((a) => a.id === (agentId || agents.data?.[0]?.id));
  const allowed = useMemo(
    () => (vaults.data ?? []).filter((v) => agent?.vault_ids.includes(v.id)),
    [vaults.data, agent],
  );
  const fieldErrors = error instanceof ApiError ? error.body.errors : undefined;

  const submit = async (event?: FormEvent) => {
    event?.preventDefault();
    if (!agent || busy) return;
    setBusy(true);
    setError(null);
    try {
      const created = await api.post('/api/conversations', {
        body: {
          agent_id: agent.id,
          ...(vaultId && allowed.some((v) => v.id === vaultId) ? { vault_id: vaultId } : {}),
          prompt,
          ...(images.length ? { images: images.map(({ media_type, data }) => ({ media_type, data })) } : {}),
        },
      });
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
                value={agent?.id ?? ''}
                onChange={(e) => {
                  setAgentId(e.target.value);
                  setVaultId('');
                }}
                disabled={!agents.data}
              >
                {(agents.data ?? []).map((a) => (
                  <option key={a.id} value={a.id}>
                    {a.name} ({a.runtime})
                  </option>
                ))}
              </select>
              {agent?.description && <p className="field-hint">{agent.description}</p>}
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
