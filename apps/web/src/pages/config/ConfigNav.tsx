import { Link, useLocation } from '../../app/router';

const TABS = [
  { href: '/environments', label: 'Environments' },
  { href: '/vaults', label: 'Vaults' },
  { href: '/agents', label: 'Agents' },
  { href: '/manifest', label: 'Export / import' },
];

/** The configuration area's tabs. */
export function ConfigNav() {
  const { pathname } = useLocation();
  return (
    <nav className="subnav" aria-label="Configuration">
      {TABS.map((t) => (
        <Link
          key={t.href}
          href={t.href}
          className="nav-link"
          aria-current={pathname === t.href || pathname.startsWith(`${t.href}/`) ? 'page' : undefined}
        >
          {t.label}
        </Link>
      ))}
    </nav>
  );
}
