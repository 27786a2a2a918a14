// The frame around every signed-in page: navigation (a top bar on a laptop, a menu button on
// a phone), the theme toggle, the account menu, the shortcut help and the global dialogs.
import { lazy, type ReactNode, Suspense, useMemo, useState } from 'react';
import { useSession } from '../api/session';
import { Dialog } from '../ui/Dialog';
import { Footer } from '../ui/Footer';
import { closeNewConversation, openNewConversation, useNewConversationOpen } from './new-conversation';
import { Link, navigate, useLocation } from './router';
import { type Shortcut, useShortcutList, useShortcuts } from './shortcuts';
import { toggleTheme } from './theme';

const NewConversationDialog = lazy(() => import('../pages/dashboard/NewConversationDialog'));

/** Navigation entries; `admin` ones show only to admins. */
export const NAV: readonly { href: string; label: string; keys?: string; admin?: boolean }[] = [
  { href: '/conversations', label: 'Conversations', keys: 'g c' },
  { href: '/agents', label: 'Agents', keys: 'g a' },
  { href: '/environments', label: 'Environments', keys: 'g e' },
  { href: '/vaults', label: 'Vaults', keys: 'g v' },
  { href: '/account', label: 'Account', keys: 'g s' },
  { href: '/admin/users', label: 'Admin', keys: 'g u', admin: true },
];

export function Shell({ children, actions }: { children: ReactNode; actions?: ReactNode }) {
  const { me, signOut } = useSession();
  const { pathname } = useLocation();
  const [menuOpen, setMenuOpen] = useState(false);
  const [helpOpen, setHelpOpen] = useState(false);
  const shortcuts = useShortcutList();
  const newOpen = useNewConversationOpen();
  const isAdmin = me?.is_admin === true;
  const own = useMemo<Shortcut[]>(
    () => [
      { keys: '?', description: 'Show keyboard shortcuts', run: () => setHelpOpen(true) },
      { keys: 'n', description: 'New conversation', run: openNewConversation },
      { keys: 't', description: 'Switch light/dark theme', run: () => toggleTheme() },
      ...NAV.filter((n) => n.keys && (!n.admin || isAdmin)).map((n) => ({
        keys: n.keys!,
        description: `Go to ${n.label}`,
        run: () => navigate(n.href),
      })),
    ],
    [isAdmin],
  );
  useShortcuts(own);
  const items = NAV.filter((n) => !n.admin || me?.is_admin);
  return (
    <div className="shell">
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <Link href="/" className="brand" aria-label="Paddock home">
          <img src="/favicon.svg" alt="" width="24" height="24" /> Paddock
        </Link>
        <button
          type="button"
          className="btn btn-ghost menu-button"
          aria-expanded={menuOpen}
          aria-controls="main-nav"
          onClick={() => setMenuOpen((o) => !o)}
        >
          Menu
        </button>
        <nav id="main-nav" aria-label="Main" className={menuOpen ? 'nav nav-open' : 'nav'}>
          {items.map((n) => (
            <Link
              key={n.href}
              href={n.href}
              className="nav-link"
              aria-current={pathname === n.href || pathname.startsWith(`${n.href}/`) ? 'page' : undefined}
              onClick={() => setMenuOpen(false)}
            >
              {n.label}
            </Link>
          ))}
        </nav>
        <div className="topbar-actions">
          {actions}
          <button
            type="button"
            className="btn btn-primary"
            onClick={openNewConversation}
            title="New conversation (n)"
            aria-label="New conversation"
          >
            <span aria-hidden="true">+</span>
            <span className="hide-narrow" aria-hidden="true">
              New conversation
            </span>
          </button>
          <button type="button" className="btn btn-ghost" onClick={() => toggleTheme()} title="Theme (t)">
            <span aria-hidden="true">◐</span>
            <span className="visually-hidden">Switch light/dark theme</span>
          </button>
          <button
            type="button"
            className="btn btn-ghost hide-narrow"
            onClick={() => setHelpOpen(true)}
            title="Shortcuts (?)"
          >
            <span aria-hidden="true">⌨</span>
            <span className="visually-hidden">Keyboard shortcuts</span>
          </button>
          {me && (
            <button
              type="button"
              className="btn btn-ghost"
              onClick={async () => {
                await signOut();
                navigate('/sign-in?flash=signed_out');
              }}
            >
              Sign out
            </button>
          )}
        </div>
      </header>
      <main id="main" className="main">
        {children}
      </main>
      {newOpen && (
        <Suspense fallback={null}>
          <NewConversationDialog onClose={closeNewConversation} />
        </Suspense>
      )}
      <Dialog open={helpOpen} onClose={() => setHelpOpen(false)} title="Keyboard shortcuts">
        <table className="shortcut-table">
          <tbody>
            {shortcuts.map((s) => (
              <tr key={s.keys}>
                <td>
                  {s.keys.split(' ').map((k, i) => (
                    // biome-ignore lint/suspicious/noArrayIndexKey: keys of a sequence may repeat
                    <kbd key={i}>{k}</kbd>
                  ))}
                </td>
                <td>{s.description}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </Dialog>
    </div>
  );
}

/** The frame of signed-out pages (auth forms, home): brand and theme only. */
export function PublicFrame({ children }: { children: ReactNode }) {
  return (
    <div className="public">
      <header className="public-header">
        <Link href="/" className="brand">
          <img src="/favicon.svg" alt="" width="24" height="24" /> Paddock
        </Link>
        <button type="button" className="btn btn-ghost" onClick={() => toggleTheme()}>
          <span aria-hidden="true">◐</span>
          <span className="visually-hidden">Switch light/dark theme</span>
        </button>
      </header>
      <main id="main" className="public-main">
        {children}
      </main>
      <Footer />
    </div>
  );
}
