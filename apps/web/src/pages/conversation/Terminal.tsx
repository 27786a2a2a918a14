// The raw stdout/stderr with ANSI colours, windowed: only the lines in view (plus a margin)
// are in the DOM, each one fixed-height, so 10,000 or 200,000 lines scroll as smoothly as 50
// (npm run bench -- web measures it). It follows the end while you are there; scrolling up
// stops following, and "Follow" (or `f`) resumes.
import { type CSSProperties, memo, useCallback, useEffect, useLayoutEffect, useRef, useState } from 'react';
import { useShortcuts } from '../../app/shortcuts';
import { cssOf } from './ansi';
import type { Line, LogModel } from './log-model';
import { useModelVersion } from './use-model';

const LINE_HEIGHT = 20;
const OVERSCAN = 30;

const LineView = memo(function LineView({
  line,
  turnLabel,
}: {
  line: Line;
  /** The line's revision: a line still being written re-renders as it grows. */
  rev: number;
  turnLabel: (id: string) => string;
}) {
  if (line.kind === 'turn') {
    return <div className="term-line term-turn">── {turnLabel(line.turnId)} ──</div>;
  }
  if (line.kind === 'marker') {
    return (
      <div className="term-line term-marker" role="note">
        ✂ {line.text}
      </div>
    );
  }
  return (
    <div className={line.stream === 'stderr' ? 'term-line term-stderr' : 'term-line'}>
      {line.segments.length === 0
        ? '\u200b'
        : line.segments.map((s, i) =>
            s.style ? (
              // biome-ignore lint/suspicious/noArrayIndexKey: segments of a line never reorder
              <span key={i} style={cssOf(s.style) as CSSProperties}>
                {s.text}
              </span>
            ) : (
              s.text
            ),
          )}
    </div>
  );
});

export function Terminal({
  model,
  turnLabel,
  height = '60vh',
}: {
  model: LogModel;
  turnLabel: (turnId: string) => string;
  height?: string;
}) {
  useModelVersion(model);
  const ref = useRef<HTMLDivElement>(null);
  const [scrollTop, setScrollTop] = useState(0);
  const [viewport, setViewport] = useState(600);
  const [follow, setFollow] = useState(true);
  const total = model.lines.length;

  const onScroll = useCallback(() => {
    const el = ref.current;
    if (!el) return;
    setScrollTop(el.scrollTop);
    const atEnd = el.scrollHeight - el.scrollTop - el.clientHeight < LINE_HEIGHT * 2;
    setFollow(atEnd);
  }, []);

  useEffect(() => {
    const el = ref.current;
    if (!el) return;
    const observer = new ResizeObserver(() => setViewport(el.clientHeight));
    observer.observe(el);
    setViewport(el.clientHeight);
    return () => observer.disconnect();
  }, []);

  // New lines while following: stay at the end.
  useLayoutEffect(() => {
    const el = ref.current;
    if (follow && el && total > 0) {
      el.scrollTop = el.scrollHeight;
      setScrollTop(el.scrollTop);
    }
  }, [total, follow]);

  const jumpToEnd = useCallback(() => {
    setFollow(true);
    const el = ref.current;
    if (el) el.scrollTop = el.scrollHeight;
  }, []);
  const [shortcuts] = useState(() => [
    { keys: 'f', description: 'Follow the end of the log', run: jumpToEnd },
  ]);
  useShortcuts(shortcuts);

  const first = Math.max(0, Math.floor(scrollTop / LINE_HEIGHT) - OVERSCAN);
  const last = Math.min(total, Math.ceil((scrollTop + viewport) / LINE_HEIGHT) + OVERSCAN);
  const visible = model.lines.slice(first, last);

  return (
    <div className="term-wrap">
      <div
        ref={ref}
        className="term"
        style={{ height }}
        onScroll={onScroll}
        role="log"
        aria-label="Raw output"
        // biome-ignore lint/a11y/noNoninteractiveTabindex: the log scrolls with the keyboard
        tabIndex={0}
      >
        <div style={{ height: total * LINE_HEIGHT, position: 'relative', minWidth: '100%' }}>
          <div className="term-window" style={{ transform: `translateY(${first * LINE_HEIGHT}px)` }}>
            {visible.map((line, i) => (
              <LineView
                // biome-ignore lint/suspicious/noArrayIndexKey: the key is the line's position in the whole log
                key={first + i}
                line={line}
                rev={line.kind === 'output' ? line.rev : 0}
                turnLabel={turnLabel}
              />
            ))}
          </div>
        </div>
        {total === 0 && <p className="term-empty">No output yet.</p>}
      </div>
      {!follow && (
        <button type="button" className="btn btn-small term-follow" onClick={jumpToEnd}>
          ↓ Follow (f)
        </button>
      )}
    </div>
  );
}
