// The home page for signed-out visitors: what Paddock is, the price when billing is on,
// and the way in.
import { useSite } from '../../api/site';
import { Link } from '../../app/router';
import { PublicFrame } from '../../app/Shell';
import { Flash } from '../../ui/Flash';

const FEATURES = [
  {
    title: 'Isolated sandboxes',
    text: 'Every conversation gets its own sandbox: its own filesystem, processes and an egress policy you control.',
  },
  {
    title: 'Any agent CLI',
    text: 'Claude Code, Codex CLI, Gemini CLI or opencode, with your system prompt, skills and MCP servers.',
  },
  {
    title: 'Live, resumable logs',
    text: 'Watch each stage and every line of output as it happens; reconnect and pick up exactly where you were.',
  },
  {
    title: 'Secrets stay secret',
    text: 'Environment and vault secrets are encrypted per account and redacted from every log before it is stored.',
  },
];

export function formatPrice(cents: number): string {
  return new Intl.NumberFormat(undefined, { style: 'currency', currency: 'USD' }).format(cents / 100);
}

export default function HomePage() {
  const site = useSite();
  const price = site.data?.billing.enabled ? site.data.billing.price_monthly_cents : null;
  return (
    <PublicFrame>
      <section className="hero">
        <Flash />
        <h1>Run AI coding agents in isolated sandboxes</h1>
        <p className="lead">
          Paddock starts coding agents in sandboxes of their own, with the repositories, packages and secrets
          they need, and streams their work back to you live — from the browser, the CLI or the API.
        </p>
        <p className="hero-actions">
          {site.data?.registration_enabled !== false && (
            <Link href="/sign-up" className="btn btn-primary">
              Create an account
            </Link>
          )}
          <Link href="/sign-in" className="btn">
            Sign in
          </Link>
        </p>
        {price !== null && price !== undefined && (
          <p className="price">
            <strong>{formatPrice(price)}</strong> per month
          </p>
        )}
        <ul className="features">
          {FEATURES.map((f) => (
            <li key={f.title} className="feature">
              <h2>{f.title}</h2>
              <p>{f.text}</p>
            </li>
          ))}
        </ul>
      </section>
    </PublicFrame>
  );
}
