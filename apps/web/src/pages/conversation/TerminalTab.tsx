// The Terminal tab: an interactive shell in the live sandbox (xterm.js) over the terminal
// WebSocket (GET /api/conversations/:id/terminal, the session cookie from this origin). Loaded
// lazily (ConversationPage imports it with React.lazy), so xterm.js is not in the first load.
// The protocol: binary frames both ways, `{"type":"resize"}` from here, `{"type":"exit"}` then
// a close from the server. The session starts when the person presses Connect.
import '@xterm/xterm/css/xterm.css';
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';
import { useEffect, useRef, useState } from 'react';

type State = 'idle' | 'connecting' | 'open' | 'ended';

export default function TerminalTab({ conversationId, live }: { conversationId: string; live: boolean }) {
  const host = useRef<HTMLElement>(null);
  const [state, setState] = useState<State>('idle');
  const [message, setMessage] = useState<string | null>(null);
  const [session, setSession] = useState(0);

  useEffect(() => {
    if (session === 0 || !host.current) return;
    const term = new Terminal({ cursorBlink: true, fontSize: 13, convertEol: false, scrollback: 5000 });
    const fit = new FitAddon();
    term.loadAddon(fit);
    term.open(host.current);
    fit.fit();
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    const socket = new WebSocket(
      `${scheme}://${location.host}/api/conversations/${encodeURIComponent(conversationId)}/terminal?cols=${term.cols}&rows=${term.rows}`,
    );
    socket.binaryType = 'arraybuffer';
    const encoder = new TextEncoder();
    let exitCode: number | null = null;
    setState('connecting');
    setMessage(null);
    socket.onopen = () => {
      setState('open');
      term.focus();
    };
    socket.onmessage = (event) => {
      if (event.data instanceof ArrayBuffer) {
        term.write(new Uint8Array(event.data));
        return;
      }
      try {
        const control = JSON.parse(String(event.data)) as { type?: string; code?: number; message?: string };
        if (control.type === 'exit' && typeof control.code === 'number') exitCode = control.code;
        if (control.type === 'error' && control.message) setMessage(control.message);
      } catch {
        // not a control message of this protocol
      }
    };
    socket.onclose = () => {
      setState('ended');
      setMessage((m) =>
        exitCode !== null
          ? `The shell exited with code ${exitCode}.`
          : (m ??
            'The terminal could not be opened or was closed. The sandbox may not be running: send a prompt to wake it, then connect again.'),
      );
    };
    const input = term.onData((data) => {
      if (socket.readyState === WebSocket.OPEN) socket.send(encoder.encode(data));
    });
    const resize = term.onResize(({ cols, rows }) => {
      if (socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify({ type: 'resize', cols, rows }));
    });
    const observer = new ResizeObserver(() => fit.fit());
    observer.observe(host.current);
    return () => {
      observer.disconnect();
      input.dispose();
      resize.dispose();
      socket.close();
      term.dispose();
    };
  }, [session, conversationId]);

  return (
    <div className="terminal-tab">
      <div className="files-toolbar">
        <span className="muted">
          {state === 'open'
            ? 'Connected: a shell in the sandbox, beside the agent (output is redacted; this session is audited).'
            : 'An interactive shell in the sandbox. It keeps the sandbox awake while open.'}
        </span>
        {state !== 'open' && state !== 'connecting' && (
          <button
            type="button"
            className="btn btn-small"
            disabled={!live}
            onClick={() => setSession((s) => s + 1)}
          >
            {state === 'ended' ? 'Reconnect' : 'Connect'}
          </button>
        )}
        {state === 'open' && (
          <button type="button" className="btn btn-small" onClick={() => setSession(0)}>
            Disconnect
          </button>
        )}
      </div>
      {!live && <p className="muted">The conversation has ended: there is no sandbox to open a shell in.</p>}
      {message && (
        <p className="notice notice-info" role="status">
          {message}
        </p>
      )}
      <section ref={host} className="terminal-host" aria-label="Sandbox terminal" hidden={session === 0} />
    </div>
  );
}
