// Who is signed in: `GET /api/auth/me` once at startup, refreshed after sign-in/out. A 401
// from any call (the session ended elsewhere) drops the console back to signed-out.
import { createContext, type ReactNode, useCallback, useContext, useEffect, useMemo, useState } from 'react';
import { type ApiData, ApiError, api, onUnauthorized } from './client';

export type Me = ApiData<'/api/auth/me'>;

interface Session {
  /** undefined while loading, null when signed out. */
  me: Me | null | undefined;
  refresh(): Promise<Me | null>;
  signOut(): Promise<void>;
}

const SessionContext = createContext<Session | null>(null);

export function SessionProvider({ children }: { children: ReactNode }) {
  const [me, setMe] = useState<Me | null | undefined>(undefined);
  const refresh = useCallback(async () => {
    try {
      const m = await api.get('/api/auth/me');
      setMe(m);
      return m;
    } catch (err) {
      if (err instanceof ApiError && (err.status === 401 || err.status === 403)) {
        setMe(null);
        return null;
      }
      throw err;
    }
  }, []);
  const signOut = useCallback(async () => {
    await api.post('/api/auth/logout').catch(() => undefined);
    setMe(null);
  }, []);
  useEffect(() => {
    refresh().catch(() => setMe(null));
    return onUnauthorized(() => setMe(null));
  }, [refresh]);
  const value = useMemo(() => ({ me, refresh, signOut }), [me, refresh, signOut]);
  return <SessionContext.Provider value={value}>{children}</SessionContext.Provider>;
}

export function useSession(): Session {
  const s = useContext(SessionContext);
  if (!s) throw new Error('useSession outside SessionProvider');
  return s;
}
