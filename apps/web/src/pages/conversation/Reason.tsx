// Why a turn or a stage failed, in the server's words, with the page that fixes it one click
// away: a reason that names the Account page (a missing or refused provider key) links it.
import { Link } from '../../app/router';

const ACCOUNT = /the console's Account page|the Account page/;

export function Reason({ text }: { text: string }) {
  const m = ACCOUNT.exec(text);
  if (!m) return <>{text}</>;
  return (
    <>
      {text.slice(0, m.index)}
      <Link href="/account">the Account page</Link>
      {text.slice(m.index + m[0].length)}
    </>
  );
}

/** A reason the page already shows in its failure banner is not repeated beside a stage or turn. */
export function shownAbove(text: string | null, failure: string | null | undefined): boolean {
  return Boolean(text && failure && (text === failure || text.endsWith(failure) || failure.endsWith(text)));
}
