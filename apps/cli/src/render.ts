// How a conversation's log looks on the user's side. Output bytes go out untouched, as they
// arrive: a turn's stdout to our stdout; a turn's stderr, and the output of the provisioning
// commands (packages, clone, setup, the runtime check: rows of no turn), to our stderr with
// the stage events, so `paddock run … -f > out.txt` keeps out.txt the agent's words:
// - `person`: for a terminal on stderr: a spinner while a stage runs, then one line per stage
//   with ✔/✖ and its duration, the message of a failure; the `turn` stage has no spinner
//   (its output is the progress);
// - `plain`: one `[stage] state` line per stage event (stderr is a file or a pipe);
// - `json`: one JSON object per line on stdout, the events exactly as the API sends them.
//
// With `events` (the default of run/prompt/logs; `--raw` turns it off) a turn is shown through
// its turn events (stream `events`) instead of the runtime's raw stdout, which is then skipped
// for turns (provisioning commands' stdout still shows): assistant text and raw lines on
// stdout; on stderr, tool calls as one line each (`▸ Bash  ls -la`, then ` ✓` or ` ✗ <first
// line of the result>` once the result comes; a result that comes after other output gets its
// own line, `◂ Bash  ls -la ✓`), errors, and the turn's usage when it ends
// (`tokens in 1,234 · out 567 · cached 89 · $0.0123`). Colours only in `person` mode with
// colour on (a terminal, NO_COLOR unset), never on stdout.

export interface TurnUsage {
  input_tokens?: number;
  output_tokens?: number;
  cache_read_tokens?: number;
  cost_usd?: number;
}

/** A common turn event (docs/api.md "Conversation events"). */
export type TurnEvent = (
  | { kind: 'text'; text: string }
  | { kind: 'tool_call'; id?: string; name: string; input: unknown }
  | { kind: 'tool_result'; id?: string; is_error: boolean; output: string }
  | { kind: 'error'; message: string }
  | { kind: 'usage'; usage: TurnUsage }
  | { kind: 'session'; session_id: string }
  | { kind: 'raw'; line: string }
) & { truncated?: true };

export interface LogEvent {
  id: string;
  stream: 'stdout' | 'stderr' | 'stage' | 'events';
  turn_id: string | null;
  created_at: string;
  text?: string;
  stage?: string;
  state?: 'started' | 'done' | 'failed' | 'interrupted';
  duration_ms?: number | null;
  message?: string | null;
  event?: TurnEvent;
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
/** Input fields that say what a tool call does, most telling first (the four runtimes' tools). */
const SUMMARY_KEYS = [
  'command',
  'cmd',
  'file_path',
  'filePath',
  'path',
  'pattern',
  'query',
  'url',
  'description',
  'prompt',
];
const SUMMARY_CHARS = 80;

/** `text` on one line (whitespace runs collapsed), at most `max` characters. */
export function oneLine(text: string, max = SUMMARY_CHARS): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > max ? `${flat.slice(0, max - 1)}…` : flat;
}

/** What a tool call does, in one line: its most telling input field, else its input as JSON. */
export function toolSummary(input: unknown): string {
  if (typeof input === 'string') return oneLine(input);
  if (input && typeof input === 'object' && !Array.isArray(input)) {
    const fields = input as Record<string, unknown>;
    for (const key of SUMMARY_KEYS) {
      const value = fields[key];
      if (typeof value === 'string' && value.trim() !== '') return oneLine(value);
      if (Array.isArray(value) && value.length > 0 && value.every((v) => typeof v === 'string'))
        return oneLine(value.join(' '));
    }
  }
  if (input === null || input === undefined) return '';
  const json = JSON.stringify(input);
  return json === '{}' || json === '[]' ? '' : oneLine(json);
}

const count = (n: number) => Math.round(n).toLocaleString('en-US');

/** `tokens in 1,234 · out 567 · cached 89 · $0.0123`: what the runtime reported; '' when nothing. */
export function formatUsage(usage: TurnUsage): string {
  const parts: string[] = [];
  if (usage.input_tokens !== undefined) parts.push(`in ${count(usage.input_tokens)}`);
  if (usage.output_tokens !== undefined) parts.push(`out ${count(usage.output_tokens)}`);
  if (usage.cache_read_tokens !== undefined) parts.push(`cached ${count(usage.cache_read_tokens)}`);
  const tokens = parts.length > 0 ? `tokens ${parts.join(' · ')}` : '';
  const cost = usage.cost_usd !== undefined ? `$${usage.cost_usd.toFixed(4)}` : '';
  return [tokens, cost].filter(Boolean).join(' · ');
}

interface Paint {
  green(text: string): string;
  red(text: string): string;
  yellow(text: string): string;
  dim(text: string): string;
  cyan(text: string): string;
  bold(text: string): string;
}

/** Where the turn-event view writes; the mode keeps the terminal's line state behind these. */
interface EventSink {
  /** The agent's words on stdout. */
  out(text: string): void;
  /** A whole line on stderr, begun on a fresh line. */
  line(text: string): void;
  /** Text on stderr that leaves its line open (a tool call awaiting its result). */
  open(text: string): void;
  /** Ends the open stderr line with `text` (which ends in a newline). */
  close(text: string): void;
}

/**
 * The turn events of one log, rendered for a person (the text modes). `settle()` ends what is
 * open (a text without its newline, a tool line without its result) before anything else is
 * written; `turnEnded` prints the usage of a turn.
 */
function createEventView(sink: EventSink, paint: Paint) {
  /** The agent's text on stdout ended without a newline. */
  let textOpen = false;
  /** A tool call line open on stderr, waiting for its result. */
  let pending: { id: string | undefined; label: string } | null = null;
  /** Labels of calls whose line was closed before their result came. */
  const calls = new Map<string, string>();
  const usage = new Map<string, TurnUsage>();

  const endText = () => {
    if (textOpen) sink.out('\n');
    textOpen = false;
  };
  const endPending = () => {
    if (!pending) return;
    if (pending.id !== undefined) calls.set(pending.id, pending.label);
    sink.close('\n');
    pending = null;
  };
  const settle = () => {
    endText();
    endPending();
  };
  const status = (isError: boolean, output: string) => {
    const first = oneLine(output.split('\n').find((l) => l.trim() !== '') ?? '');
    return isError ? `${paint.red('✗')}${first ? ` ${first}` : ''}` : paint.green('✓');
  };

  return {
    settle,
    event(turnId: string | null, event: TurnEvent) {
      switch (event.kind) {
        case 'text':
          if (event.text === '') return;
          endPending();
          sink.out(event.text);
          textOpen = !event.text.endsWith('\n');
          return;
        case 'raw':
          settle();
          sink.out(`${event.line}\n`);
          return;
        case 'tool_call': {
          settle();
          const summary = toolSummary(event.input);
          const label = `${paint.bold(event.name)}${summary ? `  ${paint.dim(summary)}` : ''}`;
          sink.open(`${paint.cyan('▸')} ${label}`);
          pending = { id: event.id, label };
          return;
        }
        case 'tool_result': {
          endText();
          if (pending && (pending.id === undefined || event.id === undefined || pending.id === event.id)) {
            sink.close(` ${status(event.is_error, event.output)}\n`);
            pending = null;
            return;
          }
          endPending();
          const label = (event.id !== undefined && calls.get(event.id)) || paint.bold('tool result');
          if (event.id !== undefined) calls.delete(event.id);
          sink.line(`${paint.cyan('◂')} ${label} ${status(event.is_error, event.output)}`);
          return;
        }
        case 'error':
          settle();
          sink.line(paint.red(`error: ${event.message}`));
          return;
        case 'usage': {
          const key = turnId ?? '';
          usage.set(key, { ...usage.get(key), ...event.usage });
          return;
        }
        case 'session':
          return;
      }
    },
    /** Prints the usage a turn reported (at its end, or of every turn when the log closes). */
    turnEnded(turnId: string | null) {
      const key = turnId ?? '';
      const reported = usage.get(key);
      usage.delete(key);
      const text = reported ? formatUsage(reported) : '';
      if (text === '') return;
      settle();
      sink.line(paint.dim(text));
    },
    pendingTurns: () => [...usage.keys()],
  };
}

const same = (text: string) => text;
const NO_PAINT: Paint = { green: same, red: same, yellow: same, dim: same, cyan: same, bold: same };

export function createRenderer(
  mode: RenderMode,
  sink: Sink,
  options: {
    color?: boolean;
    spinnerMs?: number;
    /** False when stdout is not the terminal stderr is on: its bytes then move no cursor of ours. */
    outIsTerminal?: boolean;
    /** Show turns through their turn events, skipping the turns' raw stdout (see the top). */
    events?: boolean;
    /** The clock of the spinner's elapsed time (tests give a fixed one). */
    now?: () => number;
  } = {},
): Renderer {
  const now = options.now ?? Date.now;
  const showEvents = options.events === true;
  /** Only a turn's stdout goes to stdout; provisioning output is progress, like the stages (see the top). */
  const toStdout = (e: LogEvent) => e.stream === 'stdout' && e.turn_id !== null;
  /** A turn's raw stdout, shown through its events instead. */
  const skipped = (e: LogEvent) => showEvents && toStdout(e);
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
    const view = createEventView(
      {
        out: (text) => {
          sink.out(text);
          track(text);
        },
        line,
        open: (text) => {
          sink.err(`${atLineStart ? '' : '\n'}${text}`);
          atLineStart = false;
        },
        close: (text) => {
          sink.err(text);
          atLineStart = true;
        },
      },
      NO_PAINT,
    );
    return {
      event(e) {
        if (e.stream === 'events') {
          if (e.event) view.event(e.turn_id, e.event);
          return;
        }
        if (skipped(e)) return;
        view.settle();
        if (e.stream === 'stage') {
          if (e.stage === 'turn' && e.state !== 'started') view.turnEnded(e.turn_id);
          const took = e.duration_ms != null ? ` in ${formatDuration(e.duration_ms)}` : '';
          line(`[${e.stage}] ${e.state}${took}${e.message ? `: ${e.message}` : ''}`);
        } else if (e.text) {
          (toStdout(e) ? sink.out : sink.err)(e.text);
          track(e.text);
        }
      },
      notice: (_kind, text) => {
        view.settle();
        line(`paddock: ${text}`);
      },
      record: () => {},
      close() {
        for (const turn of view.pendingTurns()) view.turnEnded(turn === '' ? null : turn);
        view.settle();
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
  const colours: Paint = { green, red, yellow, dim, cyan: (t) => paint('36', t), bold: (t) => paint('1', t) };

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
      `\r\u001b[2K${FRAMES[frame++ % FRAMES.length]} ${top.stage} ${dim(formatDuration(now() - top.since))}`,
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
  const view = createEventView(
    {
      out: (text) => {
        if (options.outIsTerminal === false) {
          sink.out(text);
          return;
        }
        clearSpinner();
        sink.out(text);
        atLineStart = text.endsWith('\n');
      },
      line,
      open: (text) => {
        clearSpinner();
        sink.err(`${atLineStart ? '' : '\n'}${text}`);
        atLineStart = false;
      },
      close: (text) => {
        sink.err(text);
        atLineStart = true;
      },
    },
    colours,
  );

  return {
    event(e) {
      if (e.stream === 'events') {
        if (e.event) view.event(e.turn_id, e.event);
        return;
      }
      if (skipped(e)) return;
      view.settle();
      if (e.stream !== 'stage') {
        if (!e.text) return;
        if (toStdout(e) && options.outIsTerminal === false) {
          sink.out(e.text);
          return;
        }
        clearSpinner();
        (toStdout(e) ? sink.out : sink.err)(e.text);
        atLineStart = e.text.endsWith('\n');
        return;
      }
      const stage = e.stage ?? 'stage';
      if (e.state === 'started') {
        // The turn's own output is its progress: no spinner over it.
        if (stage !== 'turn') open.push({ stage, since: now() });
        syncTimer();
        drawSpinner();
        return;
      }
      const at = open.findLastIndex((s) => s.stage === stage);
      if (at !== -1) open.splice(at, 1);
      syncTimer();
      if (stage === 'turn') view.turnEnded(e.turn_id);
      const took = e.duration_ms != null ? ` ${dim(formatDuration(e.duration_ms))}` : '';
      const message = e.message ? `: ${e.message}` : '';
      if (e.state === 'done') line(`${green('✔')} ${stage}${took}${message ? dim(message) : ''}`);
      else if (e.state === 'failed') line(`${red('✖')} ${stage}${took}${message}`);
      else line(`${yellow('■')} ${stage} interrupted${took}${message}`);
      drawSpinner();
    },
    notice: (_kind, text) => {
      view.settle();
      line(yellow(`paddock: ${text}`));
      drawSpinner();
    },
    record: () => {},
    close() {
      for (const turn of view.pendingTurns()) view.turnEnded(turn === '' ? null : turn);
      view.settle();
      open.length = 0;
      syncTimer();
      clearSpinner();
      if (!atLineStart) sink.err('\n');
      atLineStart = true;
    },
  };
}
