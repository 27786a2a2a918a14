import { Link } from '../app/router';

export default function NotFoundPage() {
  return (
    <section className="page narrow">
      <h1>Page not found</h1>
      <p>There is nothing at this address.</p>
      <p>
        <Link href="/">Go to the start page</Link>
      </p>
    </section>
  );
}
