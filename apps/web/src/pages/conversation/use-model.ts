import { useEffect, useState } from 'react';
import type { LogModel } from './log-model';

/**
 * The model's version, re-read at most once per animation frame: a burst of thousands of
 * events costs one render, not thousands.
 */
export function useModelVersion(model: LogModel): number {
  const [version, setVersion] = useState(model.version);
  useEffect(() => {
    let frame = 0;
    const off = model.subscribe(() => {
      if (frame) return;
      frame = requestAnimationFrame(() => {
        frame = 0;
        setVersion(model.version);
      });
    });
    setVersion(model.version);
    return () => {
      off();
      cancelAnimationFrame(frame);
    };
  }, [model]);
  return version;
}
