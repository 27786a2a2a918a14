import '../config/config.css';
import { useSite } from '../../api/site';
import { Link, useLocation } from '../../app/router';

const TABS = [
  { href: '/account', label: 'API keys and credentials' },
  { href: '/account/security', label: 'Security' },
  { href: '/account/audit', label: 'Audit log' },
];

/** The Billing tab exists only with BILLING_ENABLED (GET /api/site says; the billing page passes `billing`). */
export function AccountNav({ billing }: { billing?: boolean } = {}) {
  const { pathname } = useLocation();
  const site = useSite();
  const tabs =
    billing || site.data?.billing.enabled ? [...TABS, { href: '/account/billing', label: 'Billing' }] : TABS;
  return (
    <nav className="subnav" aria-label="Account">
      {tabs.map((t) => (
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
