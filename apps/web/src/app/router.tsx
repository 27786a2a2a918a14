// A small history router: the console has a few dozen routes and needs no more than
// pattern matching, links that do not reload, and a way to navigate from code. Patterns are
// paths with `:name` segments (`/conversations/:id`); the first pattern that matches wins.
import {
  type AnchorHTMLAttributes,
  createContext,
  type MouseEvent,
  type ReactNode,
  useCallback,
  useContext,
  useEffect,
  useMemo,
  useSyncExternalStore,
} from 'react';

export interface Location {
  pathname: string;
  search: URLSearchParams;
}

const listeners = new Set<() => void>();
function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  window.addEventListener('popstate', listener);
  return () => {
    listeners.delete(listener);
    window.removeEventListener('popstate', listener);
  };
}
const snapshot = () => window.location.pathname + window.location.search;

/** Goes to `to` (a path with optional query) without reloading the page. */
export function navigate(to: string, options: { replace?: boolean } = {}): void {
  if (to === snapshot()) return;
  if (options.replace) window.history.replaceState(null, '', to);
  else window.history.pushState(null, '', to);
  for (const l of listeners) l();
  if (!options.replace) window.scrollTo(0, 0);
}

export function useLocation(): Location {
  const href = useSyncExternalStore(subscribe, snapshot);
  return useMemo(() => {
    const url = new URL(href, window.location.origin);
    return { pathname: url.pathname, search: url.searchParams };
  }, [href]);
}

/** `match('/conversations/:id', '/conversations/42')` → `{ id: '42' }`; null when it does not match. */
export function match(pattern: string, pathname: string): Record<string, string> | null {
  const want = pattern.split('/').filter(Boolean);
  const have = pathname.split('/').filter(Boolean);
  if (want.length !== have.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < want.length; i++) {
    const w = want[i]!;
    const h = have[i]!;
    if (w.startsWith(':')) {
      try {
        params[w.slice(1)] = decodeURIComponent(h);
      } catch {
        return null;
      }
    } else if (w !== h) return null;
  }
  return params;
}

const ParamsContext = createContext<Record<string, string>>({});

export function useParams(): Record<string, string> {
  return useContext(ParamsContext);
}

export interface Route {
  path: string;
  render: () => ReactNode;
}

/** Renders the first route whose pattern matches the current path, else `fallback`. */
export function Routes({ routes, fallback }: { routes: readonly Route[]; fallback: ReactNode }) {
  const { pathname } = useLocation();
  for (const route of routes) {
    const params = match(route.path, pathname);
    if (params) return <ParamsContext.Provider value={params}>{route.render()}</ParamsContext.Provider>;
  }
  return <>{fallback}</>;
}

/** An <a> that navigates in place (modifier-clicks and middle clicks still open a tab). */
export function Link({ href, onClick, ...rest }: AnchorHTMLAttributes<HTMLAnchorElement> & { href: string }) {
  const handle = useCallback(
    (event: MouseEvent<HTMLAnchorElement>) => {
      onClick?.(event);
      if (
        event.defaultPrevented ||
        event.button !== 0 ||
        event.metaKey ||
        event.ctrlKey ||
        event.shiftKey ||
        event.altKey ||
        rest.target
      )
        return;
      event.preventDefault();
      navigate(href);
    },
    [href, onClick, rest.target],
  );
  return <a href={href} onClick={handle} {...rest} />;
}

/** Replaces the current entry with `to` once rendered (a redirect). */
export function Redirect({ to }: { to: string }) {
  useEffect(() => navigate(to, { replace: true }), [to]);
  return null;
}
