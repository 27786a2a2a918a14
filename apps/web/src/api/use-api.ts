// Loading API data in a component: `const q = useApi(() => api.get(...), [deps])` gives
// `{data, error, loading, reload}`; an unmounted or superseded load never sets state.
import { type DependencyList, useCallback, useEffect, useRef, useState } from 'react';

export interface Query<T> {
  data: T | undefined;
  error: unknown;
  loading: boolean;
  reload(): void;
  /** Replaces the data locally (after a write whose answer is the new value). */
  set(data: T): void;
}

export function useApi<T>(load: (signal: AbortSignal) => Promise<T>, deps: DependencyList): Query<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<unknown>(undefined);
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  // biome-ignore lint/correctness/useExhaustiveDependencies: the caller's deps decide when to reload
  useEffect(() => {
    const controller = new AbortController();
    setLoading(true);
    loadRef
      .current(controller.signal)
      .then((d) => {
        if (controller.signal.aborted) return;
        setData(d);
        setError(undefined);
      })
      .catch((err: unknown) => {
        if (!controller.signal.aborted) setError(err);
      })
      .finally(() => {
        if (!controller.signal.aborted) setLoading(false);
      });
    return () => controller.abort();
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data, error, loading, reload, set: setData };
}
