// The stage timeline: provision … turn, each with its state, duration and message (why a failed
// stage failed, unless the failure banner above says it already); a stage still running shows its
// elapsed time.
import { useEffect, useState } from 'react';
import { StatusBadge } from '../../ui/StatusBadge';
import { duration } from '../../ui/time';
import type { LogModel, StageEntry } from './log-model';
import { Reason, shownAbove } from './Reason';
import { useModelVersion } from './use-model';

const LABELS: Record<string, string> = {
  provision: 'Provision',
  checkpoint_restore: 'Restore checkpoint',
  packages: 'Packages',
  network: 'Network policy',
  clone: 'Clone repositories',
  setup: 'Setup script',
  runtime: 'Agent CLI',
  turn: 'Turn',
  reattach: 'Reattach',
  sandbox: 'Sandbox reclaimed',
  terminate: 'Terminate',
  log: 'Log budget',
};

function useNow(active: boolean): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    if (!active) return;
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, [active]);
  return now;
}

export function Timeline({
  model,
  turnSeq,
  failure = null,
}: {
  model: LogModel;
  turnSeq: (id: string) => number | undefined;
  /** The conversation's failure reason, shown above the log already. */
  failure?: string | null;
}) {
  useModelVersion(model);
  const stages = model.stages;
  const now = useNow(stages.some((s) => s.state === 'started'));
  if (stages.length === 0) return <p className="muted">No stages yet.</p>;
  const label = (s: StageEntry) => {
    const base = LABELS[s.stage] ?? s.stage;
    const seq = s.turnId ? turnSeq(s.turnId) : undefined;
    return s.stage === 'turn' && seq ? `${base} ${seq}` : base;
  };
  return (
    <ol className="timeline">
      {stages.map((s) => (
        <li key={s.key} className={`tl-item tl-${s.state}`}>
          <span className="tl-name">{label(s)}</span>
          <StatusBadge status={s.state} label={s.state === 'started' ? 'running' : s.state} />
          <span className="tl-time">
            {s.durationMs !== null
              ? duration(s.durationMs)
              : s.state === 'started'
                ? duration(Math.max(0, now - Date.parse(s.startedAt)))
                : ''}
          </span>
          {s.message && !shownAbove(s.message, failure) && (
            <span className="tl-message">
              <Reason text={s.message} />
            </span>
          )}
        </li>
      ))}
    </ol>
  );
}
