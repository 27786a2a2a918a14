import '../config/config.css';
import { Link, useLocation } from '../../app/router';

const TABS = [
  { href: '/account', label: 'API keys and credentials' },
  { href: '/account/security', label: 'Security' },
  { href: '/account/audit', label: 'Audit log' },
];

export function AccountNav() {
  const { pathname } = useLocation();
  return (
    <nav className="subnav" aria-label="Account">
      {TABS.map((t) => (
        <Link
          key={t.href}
          href={t.href}
          className="nav-link"
          aria-current={pathname === t.href ? 'page' : undefined}
        >
          {t.label}
        </Link>
      ))}
    </nav>
  );
}
