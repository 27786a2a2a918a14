import { Link } from '../../app/router';
import { PublicFrame } from '../../app/Shell';
import { Flash } from '../../ui/Flash';

export default function HomePage() {
  return (
    <PublicFrame>
      <section className="hero">
        <Flash />
        <h1>Run AI coding agents in isolated sandboxes</h1>
        <p className="lead">Paddock runs coding agents in sandboxes and streams their work back live.</p>
        <p className="hero-actions">
          <Link href="/sign-up" className="btn btn-primary">
            Create an account
          </Link>
          <Link href="/sign-in" className="btn">
            Sign in
          </Link>
        </p>
      </section>
    </PublicFrame>
  );
}
