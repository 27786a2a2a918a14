// A conversation's (or sandbox's, or turn's) status as a coloured badge with its word:
// colour is never the only signal.
const TONES: Record<string, string> = {
  pending: 'info',
  starting: 'info',
  queued: 'info',
  running: 'accent',
  ready: 'ok',
  idle: 'neutral',
  succeeded: 'ok',
  done: 'ok',
  started: 'accent',
  failed: 'danger',
  interrupted: 'warn',
  terminated: 'neutral',
};

export function StatusBadge({ status, label }: { status: string; label?: string }) {
  const tone = TONES[status] ?? 'neutral';
  return (
    <span className={`badge badge-${tone}`} data-status={status}>
      {(status === 'running' || status === 'pending' || status === 'starting' || status === 'started') && (
        <span className="pulse" aria-hidden="true" />
      )}
      {label ?? status}
    </span>
  );
}
