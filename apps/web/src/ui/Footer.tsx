import { useSite } from '../api/site';

/** Links for people and for agents; /terms and /privacy only when the operator set them up. */
export function Footer() {
  const site = useSite();
  return (
    <footer className="footer">
      <nav aria-label="Site">
        <a href="/api/docs">API docs</a>
        <a href="/llms.txt">llms.txt</a>
        <a href="/skill">Agent skill</a>
        {site.data?.legal && (
          <>
            <a href="/terms">Terms</a>
            <a href="/privacy">Privacy</a>
          </>
        )}
      </nav>
    </footer>
  );
}
