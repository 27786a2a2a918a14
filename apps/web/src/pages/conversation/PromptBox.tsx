// The follow-up prompt: enabled only while the conversation rests idle; otherwise it says
// why not (a turn runs, provisioning, terminated, failed).
import { type FormEvent, useEffect, useId, useRef, useState } from 'react';
import { ApiError, api } from '../../api/client';
import { useShortcuts } from '../../app/shortcuts';
import { ErrorNotice } from '../../ui/ErrorNotice';
import { ImagePicker, type PickedImage } from '../dashboard/ImagePicker';

export function disabledReason(status: string, failure: string | null): string | null {
  switch (status) {
    case 'idle':
      return null;
    case 'pending':
      return 'The sandbox is being provisioned: you can send a follow-up once the first turn ends.';
    case 'running':
      return 'A turn is running: wait for it to end, or interrupt it.';
    case 'terminated':
      return 'This conversation is terminated: start a new one to continue.';
    case 'failed':
      return `This conversation failed${failure ? ` (${failure})` : ''}: start a new one.`;
    default:
      return `The conversation is ${status}.`;
  }
}

export function PromptBox({
  conversationId,
  status,
  failure,
  onSent,
}: {
  conversationId: string;
  status: string;
  failure: string | null;
  onSent: () => void;
}) {
  const [prompt, setPrompt] = useState('');
  const [images, setImages] = useState<PickedImage[]>([]);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const id = useId();
  const ref = useRef<HTMLTextAreaElement>(null);
  const reason = disabledReason(status, failure);
  const [shortcuts] = useState(() => [
    { keys: '/', description: 'Write a follow-up prompt', run: () => ref.current?.focus() },
  ]);
  useShortcuts(shortcuts);
  useEffect(() => {
    if (!reason) setError(null);
  }, [reason]);

  const send = async (event?: FormEvent) => {
    event?.preventDefault();
    if (reason || busy || !prompt.trim()) return;
    setBusy(true);
    setError(null);
    try {
      await api.post('/api/conversations/{id}/prompts', {
        path: { id: conversationId },
        body: {
          prompt,
          ...(images.length ? { images: images.map(({ media_type, data }) => ({ media_type, data })) } : {}),
        },
      });
      setPrompt('');
      setImages([]);
      onSent();
    } catch (err) {
      setError(err);
      if (err instanceof ApiError && err.status !== 422) onSent();
    } finally {
      setBusy(false);
    }
  };

  return (
    <form className="prompt-box" onSubmit={send} aria-label="Follow-up prompt">
      <label htmlFor={id} className="label">
        Follow-up
      </label>
      <ErrorNotice error={error} />
      <textarea
        id={id}
        ref={ref}
        rows={3}
        maxLength={100_000}
        value={prompt}
        disabled={Boolean(reason)}
        aria-describedby={`${id}-why`}
        placeholder={reason ? '' : 'Ask for the next step…'}
        onChange={(e) => setPrompt(e.target.value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
            e.preventDefault();
            void send();
          }
          if (e.key === 'Escape') ref.current?.blur();
        }}
      />
      <p id={`${id}-why`} className="field-hint" role="status">
        {reason ?? (
          <>
            <kbd>Ctrl</kbd>+<kbd>Enter</kbd> sends.
          </>
        )}
      </p>
      {!reason && <ImagePicker images={images} onChange={setImages} />}
      <div className="prompt-actions">
        <button
          type="submit"
          className="btn btn-primary"
          disabled={Boolean(reason) || busy || !prompt.trim()}
        >
          {busy ? 'Sending…' : 'Send'}
        </button>
      </div>
    </form>
  );
}
