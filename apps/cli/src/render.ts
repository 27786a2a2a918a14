// How a conversation's log looks on the user's side. Output bytes go where they came from
// (the agent's stdout to our stdout, its stderr to our stderr), untouched, as they arrive.
// Stage events go to stderr, so `paddock run … -f > out.txt` keeps out.txt exactly the agent's
// stdout:
// - `person`: for a terminal on stderr: a spinner while a stage runs, then one line per stage
//   with ✔/✖ and its duration, the message of a failure; the `turn` stage has no spinner
//   (its output is the progress);
// - `plain`: one `[stage] state` line per stage event (stderr is a file or a pipe);
// - `json`: one JSON object per line on stdout, the events exactly as the API sends them.

export interface LogEvent {
  id: string;
  stream: 'stdout' | 'stderr' | 'stage';
  turn_id: string | null;
  created_at: string;
  text?: string;
  stage?: string;
  state?: 'started' | 'done' | 'failed' | 'interrupted';
  duration_ms?: number | null;
  message?: string | null;
}

export type RenderMode = 'person' | 'plain' | 'json';

export interface Renderer {
  event(event: LogEvent): void;
  /** Something the user should know that is not in the log (owner lost, reconnecting). */
  notice(kind: string, text: string): void;
  /** A JSON line in `json` mode (the conversation, the final turn); nothing otherwise. */
  record(key: string, value: unknown): void;
  /** Stops the spinner and ends a partial line; call before printing anything else. */
  close(): void;
}

export interface Sink {
  out(text: string): void;
  err(text: string): void;
}

export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s`;
}

const FRAMES = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

export function createRenderer(
  mode: RenderMode,
  sink: Sink,
  options: {
    color?: boolean;
    spinnerMs?: number;
    /** False when stdout is not the terminal stderr is on: its bytes then move no cursor of ours. */
    outIsTerminal?: boolean;
  } = {},
): Renderer {
  if (mode === 'json') {
    return {
      event: (e) => sink.out(`${JSON.stringify(e)}\n`),
      notice: (kind, text) => sink.out(`${JSON.stringify({ notice: kind, message: text })}\n`),
      record: (key, value) => sink.out(`${JSON.stringify({ [key]: value })}\n`),
      close: () => {},
    };
  }
  if (mode === 'plain') {
    // The agent's output may end without a newline: a stage line starts on its own line.
    let atLineStart = true;
    const track = (text: string) => {
      if (text !== '') atLineStart = text.endsWith('\n');
    };
    const line = (text: string) => {
      sink.err(`${atLineStart ? '' : '\n'}${text}\n`);
      atLineStart = true;
    };
    return {
      event(e) {
        if (e.stream === 'stage') {
          const took = e.duration_ms != null ? ` in ${formatDuration(e.duration_ms)}` : '';
          line(`[${e.stage}] ${e.state}${took}${e.message ? `: ${e.message}` : ''}`);
        } else if (e.text) {
          (e.stream === 'stdout' ? sink.out : sink.err)(e.text);
          track(e.text);
        }
      },
      notice: (_kind, text) => line(`paddock: ${text}`),
      record: () => {},
      close() {
        if (!atLineStart) sink.err('\n');
        atLineStart = true;
      },
    };
  }

  const color = options.color !== false;
  const paint = (code: string, text: string) => (color ? `\u001b[${code}m${text}\u001b[0m` : text);
  const green = (t: string) => paint('32', t);
  const red = (t: string) => paint('31', t);
  const yellow = (t: string) => paint('33', t);
  const dim = (t: string) => paint('2', t);

  /** Stages started and not yet ended, oldest first; the spinner shows the newest. */
  const open: Array<{ stage: string; since: number }> = [];
  let atLineStart = true;
  let spinnerShown = false;
  let frame = 0;
  let timer: ReturnType<typeof setInterval> | null = null;

  const clearSpinner = () => {
    if (spinnerShown) sink.err('\r\u001b[2K');
    spinnerShown = false;
  };
  const drawSpinner = () => {
    const top = open.at(-1);
    if (!top || !atLineStart) return;
    sink.err(
      `\r\u001b[2K${FRAMES[frame++ % FRAMES.length]} ${top.stage} ${dim(formatDuration(Date.now() - top.since))}`,
    );
    spinnerShown = true;
  };
  const syncTimer = () => {
    const want = open.length > 0;
    if (want && !timer) {
      timer = setInterval(drawSpinner, options.spinnerMs ?? 100);
      timer.unref();
    } else if (!want && timer) {
      clearInterval(timer);
      timer = null;
    }
  };
  const line = (text: string) => {
    clearSpinner();
    sink.err(`${atLineStart ? '' : '\n'}${text}\n`);
    atLineStart = true;
  };

  return {
    event(e) {
      if (e.stream !== 'stage') {
        if (!e.text) return;
        if (e.stream === 'stdout' && options.outIsTerminal === false) {
          sink.out(e.text);
          return;
        }
        clearSpinner();
        (e.stream === 'stdout' ? sink.out : sink.err)(e.text);
        atLineStart = e.text.endsWith('\n');
        return;
      }
      const stage = e.stage ?? 'stage';
      if (e.state === 'started') {
        // The turn's own output is its progress: no spinner over it.
        if (stage !== 'turn') open.push({ stage, since: Date.now() });
        syncTimer();
        drawSpinner();
        return;
      }
      const at = open.findLastIndex((s) => s.stage === stage);
      if (at !== -1) open.splice(at, 1);
      syncTimer();
      const took = e.duration_ms != null ? ` ${dim(formatDuration(e.duration_ms))}` : '';
      const message = e.message ? `: ${e.message}` : '';
      if (e.state === 'done') line(`${green('✔')} ${stage}${took}${message ? dim(message) : ''}`);
      else if (e.state === 'failed') line(`${red('✖')} ${stage}${took}${message}`);
      else line(`${yellow('■')} ${stage} interrupted${took}${message}`);
      drawSpinner();
    },
    notice: (_kind, text) => {
      line(yellow(`paddock: ${text}`));
      drawSpinner();
    },
    record: () => {},
    close() {
      open.length = 0;
      syncTimer();
      clearSpinner();
      if (!atLineStart) sink.err('\n');
      atLineStart = true;
    },
  };
}
