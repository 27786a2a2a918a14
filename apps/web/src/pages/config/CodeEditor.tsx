// A light code editor: a monospace textarea with line numbers beside it. Tab inserts two
// spaces (Shift+Tab removes them) instead of leaving the field; Escape then Tab leaves it, so
// keyboard users are never trapped. Loaded lazily by the forms that use it.
import { type KeyboardEvent, useId, useRef, useState } from 'react';

export default function CodeEditor({
  label,
  value,
  onChange,
  hint,
  errors,
  rows = 12,
}: {
  label: string;
  value: string;
  onChange: (value: string) => void;
  hint?: string;
  errors?: string[] | undefined;
  rows?: number;
}) {
  const id = useId();
  const gutter = useRef<HTMLDivElement>(null);
  const [escaped, setEscaped] = useState(false);
  const lines = Math.max(rows, value.split('\n').length);
  const onKeyDown = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === 'Escape') {
      setEscaped(true);
      return;
    }
    if (e.key !== 'Tab' || escaped) {
      setEscaped(false);
      return;
    }
    e.preventDefault();
    // Edited in place (text and caret at once), then reported: React finds the value it renders
    // already there and leaves the caret alone. Setting the value through state and the caret a
    // frame later let a key typed in between land at the end of the text.
    const el = e.currentTarget;
    const { selectionStart: start } = el;
    if (e.shiftKey) {
      const lineStart = value.lastIndexOf('\n', start - 1) + 1;
      const strip = value.startsWith('  ', lineStart) ? 2 : value.startsWith(' ', lineStart) ? 1 : 0;
      if (!strip) return;
      el.setRangeText('', lineStart, lineStart + strip, 'preserve');
    } else {
      el.setRangeText('  ', start, el.selectionEnd, 'end');
    }
    onChange(el.value);
  };
  return (
    <div className="field">
      <label htmlFor={id}>{label}</label>
      <div className="code-editor">
        <div className="code-gutter" ref={gutter} aria-hidden="true">
          {Array.from({ length: lines }, (_, i) => (
            // biome-ignore lint/suspicious/noArrayIndexKey: line numbers are their index
            <div key={i}>{i + 1}</div>
          ))}
        </div>
        <textarea
          id={id}
          className="code-input"
          spellCheck={false}
          autoCapitalize="off"
          autoComplete="off"
          rows={rows}
          wrap="off"
          value={value}
          aria-describedby={`${id}-hint`}
          aria-invalid={errors?.length ? true : undefined}
          onChange={(e) => onChange(e.target.value)}
          onKeyDown={onKeyDown}
          onScroll={(e) => {
            if (gutter.current) gutter.current.scrollTop = e.currentTarget.scrollTop;
          }}
        />
      </div>
      <p id={`${id}-hint`} className={errors?.length ? 'field-hint field-error' : 'field-hint'}>
        {errors?.length
          ? errors.join('; ')
          : (hint ?? 'Tab indents; press Escape, then Tab, to leave the editor.')}
      </p>
    </div>
  );
}
