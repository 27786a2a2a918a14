// The conversation's log as the page shows it, built from the feed's events in id order:
// terminal lines (stdout/stderr with ANSI styles), the stage timeline, the parsed agent
// events (transcript) and the truncation marker. Invariant (conversation.browser.test.ts,
// "reload mid-turn"): an event is applied at most once — ids increase within a
// conversation, so anything at or below the last applied id is a replay and is dropped.
// That makes reconnects (Last-Event-ID) and overlapping reads safe: no gaps, no repeats.
import { AnsiParser, type Segment } from './ansi';

export interface OutputEvent {
  id: string;
  stream: 'stdout' | 'stderr';
  turn_id: string | null;
  created_at: string;
  text: string;
}
export interface StageEvent {
  id: string;
  stream: 'stage';
  stage: string;
  state: 'started' | 'done' | 'failed' | 'interrupted';
  duration_ms?: number | null;
  message: string | null;
  turn_id: string | null;
  created_at: string;
}
export interface AgentEvent {
  id: string;
  stream: 'events';
  turn_id: string | null;
  created_at: string;
  event: { kind: string; [field: string]: unknown };
}
export type FeedEvent = OutputEvent | StageEvent | AgentEvent;

export type Line =
  | {
      kind: 'output';
      stream: 'stdout' | 'stderr';
      segments: Segment[] /** bumped on each change */;
      rev: number;
    }
  | { kind: 'turn'; turnId: string }
  | { kind: 'marker'; text: string };

export interface StageEntry {
  key: string;
  stage: string;
  turnId: string | null;
  state: StageEvent['state'];
  startedAt: string;
  durationMs: number | null;
  message: string | null;
}

export interface TranscriptItem {
  id: string;
  turnId: string | null;
  kind: string;
  event: AgentEvent['event'];
  /** When the event was stored (a tool call still running counts from it). */
  at: string;
  /** Consecutive text events of one turn are joined into one item. */
  text?: string;
}

/** Lines kept at most; older ones are dropped from the view (the API keeps them all). */
export const MAX_LINES = 200_000;

export class LogModel {
  readonly lines: Line[] = [];
  readonly stages: StageEntry[] = [];
  readonly transcript: TranscriptItem[] = [];
  truncated: string | null = null;
  lastId: string | null = null;
  /** Bumped on every change; the view re-renders on it. */
  version = 0;
  private last = -1n;
  private parsers = { stdout: new AnsiParser(), stderr: new AnsiParser() };
  /** Index in `lines` of the line each stream is still writing (no newline yet). */
  private open: Record<'stdout' | 'stderr', number | null> = { stdout: null, stderr: null };
  private lastTurn: string | null = null;
  private listeners = new Set<() => void>();

  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Applies events in order; returns how many were new. */
  add(events: readonly FeedEvent[]): number {
    let applied = 0;
    for (const e of events) {
      let id: bigint;
      try {
        id = BigInt(e.id);
      } catch {
        continue;
      }
      if (id <= this.last) continue;
      this.last = id;
      this.lastId = e.id;
      applied++;
      if (e.stream === 'stdout' || e.stream === 'stderr') this.output(e);
      else if (e.stream === 'stage') this.stage(e);
      else if (e.stream === 'events') this.agentEvent(e);
    }
    if (applied > 0) {
      this.trim();
      this.version++;
      for (const l of this.listeners) l();
    }
    return applied;
  }

  private output(e: OutputEvent) {
    if (e.turn_id && e.turn_id !== this.lastTurn) {
      this.lastTurn = e.turn_id;
      this.closeAll();
      this.lines.push({ kind: 'turn', turnId: e.turn_id });
    }
    const stream = e.stream;
    const segments = this.parsers[stream].parse(e.text);
    let current = this.currentLine(stream);
    for (const seg of segments) {
      const parts = seg.text.replace(/\r\n/g, '\n').split('\n');
      parts.forEach((part, i) => {
        if (i > 0) {
          this.open[stream] = null;
          current = this.currentLine(stream);
        }
        if (part === '') return;
        // A carriage return rewrites the line (progress bars): keep what follows the last one.
        const cr = part.lastIndexOf('\r');
        if (cr !== -1) {
          current.segments.length = 0;
          current.rev++;
          part = part.slice(cr + 1);
          if (part === '') return;
        }
        current.segments.push({ text: part, style: seg.style });
        current.rev++;
      });
    }
    // A chunk that ended with a newline leaves no open line behind it.
    if (e.text.endsWith('\n')) this.open[stream] = null;
    if (current.segments.length === 0 && this.open[stream] === null) this.dropIfEmpty(current);
  }

  private currentLine(stream: 'stdout' | 'stderr'): Extract<Line, { kind: 'output' }> {
    const at = this.open[stream];
    if (at !== null) {
      const line = this.lines[at];
      if (line?.kind === 'output') return line;
    }
    const line: Extract<Line, { kind: 'output' }> = { kind: 'output', stream, segments: [], rev: 0 };
    this.lines.push(line);
    this.open[stream] = this.lines.length - 1;
    return line;
  }

  private dropIfEmpty(line: Line) {
    if (this.lines.at(-1) === line) this.lines.pop();
  }

  private closeAll() {
    this.open = { stdout: null, stderr: null };
  }

  private stage(e: StageEvent) {
    if (e.stage === 'log' && e.state === 'failed') {
      this.truncated = e.message ?? 'output budget reached; further output is not stored';
      this.closeAll();
      this.lines.push({ kind: 'marker', text: this.truncated });
    }
    if (e.state === 'started') {
      this.stages.push({
        key: e.id,
        stage: e.stage,
        turnId: e.turn_id,
        state: 'started',
        startedAt: e.created_at,
        durationMs: null,
        message: e.message,
      });
      return;
    }
    for (let i = this.stages.length - 1; i >= 0; i--) {
      const s = this.stages[i]!;
      if (s.stage === e.stage && s.turnId === e.turn_id && s.state === 'started') {
        s.state = e.state;
        s.durationMs = e.duration_ms ?? Date.parse(e.created_at) - Date.parse(s.startedAt);
        s.message = e.message;
        return;
      }
    }
    this.stages.push({
      key: e.id,
      stage: e.stage,
      turnId: e.turn_id,
      state: e.state,
      startedAt: e.created_at,
      durationMs: e.duration_ms ?? null,
      message: e.message,
    });
  }

  private agentEvent(e: AgentEvent) {
    const kind = String(e.event.kind);
    // A line the runtime's adapter could not read is in the raw output already.
    if (kind === 'raw') return;
    const last = this.transcript.at(-1);
    // A runtime names its session at a turn's start and again at its end: once per turn is enough.
    if (
      kind === 'session' &&
      this.transcript.some(
        (i) =>
          i.kind === 'session' && i.turnId === e.turn_id && i.event['session_id'] === e.event['session_id'],
      )
    )
      return;
    const text = typeof e.event['text'] === 'string' ? (e.event['text'] as string) : undefined;
    if (kind === 'text' && last?.kind === 'text' && last.turnId === e.turn_id && text !== undefined) {
      last.text = (last.text ?? '') + text;
      return;
    }
    this.transcript.push({
      id: e.id,
      turnId: e.turn_id,
      kind,
      event: e.event,
      at: e.created_at,
      ...(text !== undefined ? { text } : {}),
    });
  }

  private trim() {
    const over = this.lines.length - MAX_LINES;
    if (over <= 0) return;
    this.lines.splice(0, over);
    for (const s of ['stdout', 'stderr'] as const) {
      const at = this.open[s];
      this.open[s] = at === null || at < over ? null : at - over;
    }
  }
}
