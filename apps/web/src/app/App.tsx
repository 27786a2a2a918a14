// Chooses the page for the current path and who may see it: signed-out people are sent to
// sign in (and back afterwards), signed-in people away from the sign-in forms.
import { lazy, Suspense, useEffect } from 'react';
import { useSession } from '../api/session';
import { Redirect, Routes, useLocation } from './router';
import { type PageRoute, ROUTES } from './routes';
import { PublicFrame, Shell } from './Shell';

const HomePage = lazy(() => import('../pages/home/HomePage'));
const DashboardPage = lazy(() => import('../pages/dashboard/DashboardPage'));
const NotFoundPage = lazy(() => import('../pages/NotFoundPage'));

function Loading() {
  return (
    <p className="loading" aria-live="polite">
      Loading…
    </p>
  );
}

function Guarded({ route }: { route: PageRoute }) {
  const { me } = useSession();
  const { pathname, search } = useLocation();
  useEffect(() => {
    document.title = `${route.title} · Paddock`;
  }, [route.title]);
  if (me === undefined) return <Loading />;
  const Page = route.page;
  if ((route.access === 'signed-in' || route.access === 'admin') && !me) {
    const back = pathname + (search.size ? `?${search}` : '');
    return <Redirect to={`/sign-in?next=${encodeURIComponent(back)}`} />;
  }
  if (route.access === 'admin' && !me?.is_admin) return <NotFoundPage />;
  if (route.access === 'signed-out' && me) return <Redirect to="/" />;
  const page = (
    <Suspense fallback={<Loading />}>
      <Page />
    </Suspense>
  );
  return me && route.access !== 'signed-out' ? <Shell>{page}</Shell> : <PublicFrame>{page}</PublicFrame>;
}

function Root() {
  const { me } = useSession();
  useEffect(() => {
    document.title = me ? 'Conversations · Paddock' : 'Paddock — AI coding agents in sandboxes';
  }, [me]);
  if (me === undefined) return <Loading />;
  return (
    <Suspense fallback={<Loading />}>
      {me ? (
        <Shell>
          <DashboardPage />
        </Shell>
      ) : (
        <HomePage />
      )}
    </Suspense>
  );
}

export function App() {
  const { me } = useSession();
  return (
    <Routes
      routes={[
        { path: '/', render: () => <Root /> },
        ...ROUTES.map((route) => ({ path: route.path, render: () => <Guarded route={route} /> })),
      ]}
      fallback={
        <Suspense fallback={<Loading />}>
          {me ? (
            <Shell>
              <NotFoundPage />
            </Shell>
          ) : (
            <PublicFrame>
              <NotFoundPage />
            </PublicFrame>
          )}
        </Suspense>
      }
    />
  );
}
