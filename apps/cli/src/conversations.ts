// The conversation commands: run, prompt, logs, conversations, turns, interrupt, terminate
// (delete lives with the resources' delete in main.ts).
//
// Exit status of `run -f` and `prompt -f` (docs/cli.md): the followed turn's exit code when
// its process reported one (0–255; 0 only for a succeeded turn); otherwise 0 for a succeeded
// turn, 130 for an interrupted one, 1 for a failed turn or a conversation that failed or was
// terminated. Ctrl-C detaches (the agent keeps running) and exits 130.
import type { Command } from 'commander';
import type { ApiClient } from './client.ts';
import type { Env } from './config.ts';
import { ApiError, CliError } from './errors.ts';
import { type Decision, follow } from './follow.ts';
import { readImages } from './images.ts';
import { type Io, json, type OutputFormat, table } from './output.ts';
import { readAllStdin } from './prompt.ts';
import { createRenderer, type LogEvent, type Renderer, type RenderMode } from './render.ts';
import { findOne, RESOURCES, type Row } from './resources.ts';

export interface CommandContext {
  io: Io;
  env: Env;
  client(): ApiClient;
  format(): OutputFormat;
  print(text: string): void;
}

export interface Conversation {
  id: string;
  agent_id: string | null;
  status: 'pending' | 'running' | 'idle' | 'failed' | 'terminated';
  title: string;
  failure_reason: string | null;
  updated_at: string;
  [key: string]: unknown;
}

export interface Turn {
  id: string;
  seq: number;
  status: 'queued' | 'running' | 'succeeded' | 'failed' | 'interrupted';
  prompt: string;
  exit_code: number | null;
  error: string | null;
  created_at: string;
  started_at: string | null;
  ended_at: string | null;
  [key: string]: unknown;
}

const STREAMS = ['stdout', 'stderr', 'stage', 'events'];
/** What run/prompt/logs follow unless `--raw`: the turn events, and stdout for provisioning output. */
const EVENT_STREAMS = ['stdout', 'stderr', 'stage', 'events'];
const TERMINAL = new Set(['failed', 'terminated']);
const TURN_ENDED = new Set(['succeeded', 'failed', 'interrupted']);
/** Stages whose failure does not fail the conversation. */
const NON_FATAL = new Set(['turn', 'checkpoint_restore', 'log']);
/** How long `run -f` looks for the end of a conversation or turn after a failed stage (20 × 250 ms). */
const SETTLE_POLLS = 20;
const SETTLE_POLL_MS = 250;
/** How long a command waits out `503 conversation_provisioning` before giving up. */
const PROVISIONING_PATIENCE_MS = 10 * 60_000;

export const conversationPath = (id: string) => `/api/conversations/${encodeURIComponent(id)}`;
const collect = (value: string, previous: string[]) => [...previous, value];

function renderMode(ctx: CommandContext): RenderMode {
  if (ctx.format() === 'json') return 'json';
  return ctx.io.errIsTty ? 'person' : 'plain';
}

/** `events`: show turns through their turn events (render.ts); false for `--raw`. */
function newRenderer(ctx: CommandContext, events: boolean): Renderer {
  return createRenderer(
    renderMode(ctx),
    { out: ctx.io.out, err: ctx.io.err },
    { color: !ctx.env['NO_COLOR'], outIsTerminal: ctx.io.outIsTty, events },
  );
}

async function promptText(text: string): Promise<string> {
  if (text !== '-') return text;
  return (await readAllStdin()).replace(/\r?\n$/, '');
}

/** Retries a command the server answers `503 conversation_provisioning`, as its Retry-After asks. */
async function whileProvisioning<T>(ctx: CommandContext, work: () => Promise<T>): Promise<T> {
  const since = Date.now();
  let told = false;
  while (true) {
    try {
      return await work();
    } catch (err) {
      if (
        !(err instanceof ApiError) ||
        err.status !== 503 ||
        err.code !== 'conversation_provisioning' ||
        Date.now() - since > PROVISIONING_PATIENCE_MS
      )
        throw err;
      if (!told && ctx.format() !== 'json')
        ctx.io.err('paddock: the conversation is provisioning; waiting…\n');
      told = true;
      await new Promise((r) => setTimeout(r, Math.min(10, Math.max(1, err.retryAfterSeconds ?? 5)) * 1000));
    }
  }
}

/** A turn that did not succeed never exits 0, whatever its process reported. */
function exitCodeOf(turn: Turn): number {
  const code = turn.exit_code;
  if (code !== null && code >= 0 && code <= 255 && (code !== 0 || turn.status === 'succeeded')) return code;
  if (turn.status === 'succeeded') return 0;
  if (turn.status === 'interrupted') return 130;
  return 1;
}

/**
 * Follows one turn to its end and returns the exit status. `turnId` null: the conversation's
 * first turn (`run`: the stream starts with its provisioning). `since`: events of no turn
 * (a re-provision's stages) are shown from this time on; earlier turns' events are skipped.
 */
async function followTurn(
  ctx: CommandContext,
  api: ApiClient,
  conversationId: string,
  target: { turnId: string | null; since: string | null; after?: string | undefined; raw: boolean },
): Promise<number> {
  const renderer = newRenderer(ctx, !target.raw);
  const detach = new AbortController();
  const stopListening = ctx.io.onInterrupt(() => detach.abort());
  const since = target.since ? Date.parse(target.since) : Number.NEGATIVE_INFINITY;
  let turnId = target.turnId;

  const turns = async () =>
    (await api.request<{ data: Turn[] }>('GET', `${conversationPath(conversationId)}/turns`)).data;
  const findTurn = (list: Turn[]) =>
    turnId ? list.find((t) => t.id === turnId) : list.slice().sort((a, b) => a.seq - b.seq)[0];
  const conversation = () => api.request<Conversation>('GET', conversationPath(conversationId));
  /** The turn ended, or the conversation can no longer run it. */
  const settled = async (): Promise<Decision> => {
    if (TERMINAL.has((await conversation()).status)) return 'stop';
    const turn = findTurn(await turns());
    return turn && TURN_ENDED.has(turn.status) ? 'stop' : 'continue';
  };
  /**
   * After a failed stage: the server writes the stage row first, then destroys the sandbox and
   * fails the conversation or the turn, so look again for a few seconds instead of waiting for
   * the stream to go quiet.
   */
  const settledSoon = async (): Promise<Decision> => {
    for (let i = 0; i < SETTLE_POLLS; i++) {
      if ((await settled()) === 'stop') return 'stop';
      await new Promise((r) => setTimeout(r, SETTLE_POLL_MS));
    }
    return 'continue';
  };

  try {
    const result = await follow({
      client: api,
      conversationId,
      streams: target.raw ? null : EVENT_STREAMS,
      wait: true,
      ...(target.after ? { after: target.after } : {}),
      signal: detach.signal,
      check: settled,
      onNotice: (kind, text) => renderer.notice(kind, text),
      async onEvent(event: LogEvent) {
        const ours =
          event.turn_id === null || event.turn_id === undefined
            ? Date.parse(event.created_at) >= since
            : turnId === null || event.turn_id === turnId;
        if (!ours) return 'continue';
        renderer.event(event);
        if (event.stream !== 'stage' || event.state === 'started') return 'continue';
        if (event.stage === 'turn' && event.turn_id) {
          turnId ??= event.turn_id;
          return event.turn_id === turnId ? 'stop' : 'continue';
        }
        if (event.state === 'failed' && !NON_FATAL.has(event.stage ?? '')) return await settledSoon();
        return 'continue';
      },
    });
    renderer.close();
    if (result.end === 'detached') {
      ctx.io.err(
        `paddock: detached; the agent keeps running. Re-attach with: paddock logs ${conversationId} -f\n`,
      );
      return 130;
    }
    // The turn's stage event can be committed just before its row: give the row a moment.
    let turn = findTurn(await turns());
    for (let i = 0; i < 20 && turn && !TURN_ENDED.has(turn.status); i++) {
      await new Promise((r) => setTimeout(r, 100));
      turn = findTurn(await turns());
    }
    const conv = await conversation();
    if (turn && TURN_ENDED.has(turn.status)) {
      renderer.record('turn', turn);
      if (ctx.format() !== 'json' && conv.status === 'failed')
        ctx.io.err(
          `paddock: conversation failed: ${conv.failure_reason ?? turn.error ?? 'no reason given'}\n`,
        );
      else if (ctx.format() !== 'json' && turn.error)
        ctx.io.err(`paddock: turn ${turn.status}: ${turn.error}\n`);
      return exitCodeOf(turn);
    }
    renderer.record('conversation', conv);
    if (ctx.format() !== 'json') {
      ctx.io.err(
        conv.status === 'failed'
          ? `paddock: conversation failed${conv.failure_reason ? `: ${conv.failure_reason}` : ''}\n`
          : `paddock: conversation ${conv.status}\n`,
      );
    }
    return 1;
  } finally {
    stopListening();
    renderer.close();
  }
}

/** The id of the conversation's last stage event ('' when none), read with `wait=false`. */
async function lastStageEventId(api: ApiClient, conversationId: string): Promise<string> {
  const drained = await follow({
    client: api,
    conversationId,
    streams: ['stage'],
    wait: false,
    signal: new AbortController().signal,
    onEvent: () => 'continue',
    onNotice: () => {},
  });
  return drained.lastEventId;
}

async function resolveAgentNames(api: ApiClient): Promise<Map<string, string>> {
  const agents = await api.request<{ data: Row[] }>('GET', RESOURCES['agents']!.path);
  return new Map(agents.data.map((a) => [String(a['id']), String(a['name'])]));
}

const shortTime = (iso: unknown) => String(iso ?? '').replace(/\.\d{3}Z$/, 'Z');

export function registerConversationCommands(program: Command, ctx: CommandContext): void {
  /** Commands that return an exit status other than 0 set it here (run -f, prompt -f). */
  const { print } = ctx;

  program
    .command('run')
    .description('start a conversation with an agent (by name or id); -f follows its first turn')
    .argument('<agent>', 'agent name or id')
    .argument('<prompt>', 'the prompt; "-" reads it from standard input')
    .option('--vault <vault>', "vault name or id (must be on the agent's allowlist)")
    .option('-f, --follow', 'stream the provisioning and the turn until it ends')
    .option('--raw', "with -f: the runtime's raw stdout/stderr instead of its rendered events")
    .option('--image <file>', 'attach an image (PNG, JPEG, GIF, WebP; repeatable, at most 4)', collect, [])
    .action(
      async (
        agentRef: string,
        promptArg: string,
        opts: { vault?: string; follow?: boolean; raw?: boolean; image: string[] },
      ) => {
        const api = ctx.client();
        const prompt = await promptText(promptArg);
        const images = readImages(opts.image);
        const agent = await findOne(api, RESOURCES['agents']!, agentRef);
        const vault = opts.vault ? await findOne(api, RESOURCES['vaults']!, opts.vault) : null;
        const conv = await api.request<Conversation>('POST', '/api/conversations', {
          agent_id: agent['id'],
          ...(vault ? { vault_id: vault['id'] } : {}),
          prompt,
          ...(images.length > 0 ? { images } : {}),
        });
        if (!opts.follow) {
          if (ctx.format() === 'json') print(json(conv));
          else
            print(
              `Started conversation ${conv.id} (${conv.title}) with ${agent['name']}\nFollow it: paddock logs ${conv.id} -f`,
            );
          return;
        }
        if (ctx.format() === 'json') ctx.io.out(`${JSON.stringify({ conversation: conv })}\n`);
        else ctx.io.err(`paddock: conversation ${conv.id} started with ${agent['name']}\n`);
        const code = await followTurn(ctx, api, conv.id, {
          turnId: null,
          since: null,
          raw: opts.raw === true,
        });
        if (code !== 0) throw new ExitStatus(code);
      },
    );

  program
    .command('prompt')
    .description('send a follow-up prompt to a conversation; -f follows the turn')
    .argument('<id>', 'conversation id')
    .argument('<text>', 'the prompt; "-" reads it from standard input')
    .option('-f, --follow', 'stream the turn until it ends')
    .option('--raw', "with -f: the runtime's raw stdout/stderr instead of its rendered events")
    .option('--image <file>', 'attach an image (PNG, JPEG, GIF, WebP; repeatable, at most 4)', collect, [])
    .action(
      async (id: string, textArg: string, opts: { follow?: boolean; raw?: boolean; image: string[] }) => {
        const api = ctx.client();
        const prompt = await promptText(textArg);
        const images = readImages(opts.image);
        // Where the new turn's events begin: stage events are few, and the last one (the end of
        // the previous turn, or a lifecycle stage) comes after all output before it, since the
        // log writer persists a stage after the output written before it and a prompt is refused
        // while a turn runs. Following from there skips the earlier turns without replaying them.
        const after = opts.follow ? await lastStageEventId(api, id) : undefined;
        const { turn } = await whileProvisioning(ctx, () =>
          api.request<{ turn: Turn }>('POST', `${conversationPath(id)}/prompts`, {
            prompt,
            ...(images.length > 0 ? { images } : {}),
          }),
        );
        if (!opts.follow) {
          if (ctx.format() === 'json') print(json(turn));
          else print(`Turn ${turn.seq} (${turn.id}) accepted\nFollow it: paddock logs ${id} -f`);
          return;
        }
        if (ctx.format() === 'json') ctx.io.out(`${JSON.stringify({ turn_accepted: turn })}\n`);
        const code = await followTurn(ctx, api, id, {
          turnId: turn.id,
          since: turn.created_at,
          after,
          raw: opts.raw === true,
        });
        if (code !== 0) throw new ExitStatus(code);
      },
    );

  program
    .command('logs')
    .description("print a conversation's log (output and stages); -f keeps following it")
    .argument('<id>', 'conversation id')
    .option('-f, --follow', 'keep following until Ctrl-C or the conversation ends')
    .option('--raw', "the runtime's raw stdout/stderr instead of its rendered events")
    .option(
      '--streams <list>',
      'comma list of stdout, stderr, stage, events (default: all; --raw: all but events)',
    )
    .action(async (id: string, opts: { follow?: boolean; raw?: boolean; streams?: string }) => {
      let streams: string[] | null = opts.raw ? null : EVENT_STREAMS;
      if (opts.streams !== undefined) {
        streams = opts.streams
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean);
        const unknown = streams.filter((s) => !STREAMS.includes(s));
        if (streams.length === 0 || unknown.length > 0)
          throw new CliError(`--streams takes a comma list of stdout, stderr, stage, events`, [], 2);
      }
      const api = ctx.client();
      // The default view shows turns through their events; listed streams show as they are.
      const renderer = newRenderer(ctx, !opts.raw && opts.streams === undefined);
      const detach = new AbortController();
      const stopListening = ctx.io.onInterrupt(() => detach.abort());
      try {
        const result = await follow({
          client: api,
          conversationId: id,
          streams,
          wait: opts.follow === true,
          signal: detach.signal,
          onEvent: (event) => {
            renderer.event(event);
            return 'continue';
          },
          onNotice: (kind, text) => renderer.notice(kind, text),
          check: async () =>
            TERMINAL.has((await api.request<Conversation>('GET', conversationPath(id))).status)
              ? 'stop'
              : 'continue',
        });
        renderer.close();
        if (result.end === 'detached') {
          ctx.io.err(`paddock: stopped following; the agent keeps running\n`);
          throw new ExitStatus(130);
        }
      } finally {
        stopListening();
        renderer.close();
      }
    });

  program
    .command('conversations')
    .alias('convs')
    .description('list your conversations, newest activity first')
    .option('--status <status>', 'pending | running | idle | failed | terminated')
    .option('--agent <agent>', 'agent name or id')
    .option('--limit <n>', 'how many (1–200)', '50')
    .action(async (opts: { status?: string; agent?: string; limit: string }) => {
      const api = ctx.client();
      const limit = Number(opts.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 200)
        throw new CliError('--limit must be an integer from 1 to 200', [], 2);
      const query = new URLSearchParams({ limit: String(limit) });
      if (opts.status) query.set('status', opts.status);
      if (opts.agent)
        query.set('agent_id', String((await findOne(api, RESOURCES['agents']!, opts.agent))['id']));
      const page = await api.request<{ data: Conversation[]; meta: { has_more: boolean } }>(
        'GET',
        `/api/conversations?${query}`,
      );
      if (ctx.format() === 'json') {
        print(json(page.data));
        return;
      }
      if (page.data.length === 0) {
        print('no conversations');
        return;
      }
      const names = await resolveAgentNames(api);
      print(
        table(
          ['ID', 'TITLE', 'STATUS', 'AGENT', 'UPDATED'],
          page.data.map((c) => [
            c.id,
            c.title.length > 50 ? `${c.title.slice(0, 49)}…` : c.title,
            c.status,
            c.agent_id ? (names.get(c.agent_id) ?? c.agent_id) : '-',
            shortTime(c.updated_at),
          ]),
        ),
      );
      if (page.meta.has_more) ctx.io.err(`paddock: more conversations exist: use --limit or filters\n`);
    });

  program
    .command('turns')
    .description("list a conversation's turns")
    .argument('<id>', 'conversation id')
    .action(async (id: string) => {
      const { data } = await ctx.client().request<{ data: Turn[] }>('GET', `${conversationPath(id)}/turns`);
      if (ctx.format() === 'json') {
        print(json(data));
        return;
      }
      print(
        table(
          ['SEQ', 'ID', 'STATUS', 'EXIT', 'STARTED', 'PROMPT'],
          data.map((t) => {
            const firstLine = t.prompt.split('\n')[0] ?? '';
            return [
              String(t.seq),
              t.id,
              t.status,
              t.exit_code === null ? '-' : String(t.exit_code),
              shortTime(t.started_at ?? t.created_at),
              firstLine.length > 40 ? `${firstLine.slice(0, 39)}…` : firstLine,
            ];
          }),
        ),
      );
    });

  program
    .command('interrupt')
    .description('stop the running turn of a conversation (the conversation stays usable)')
    .argument('<id>', 'conversation id')
    .action(async (id: string) => {
      const body = await whileProvisioning(ctx, () =>
        ctx.client().request<unknown>('POST', `${conversationPath(id)}/interrupt`),
      );
      if (ctx.format() === 'json') print(json(body ?? { interrupted: id }));
      else print(`interrupting the running turn of ${id}`);
    });

  program
    .command('terminate')
    .description('end a conversation and destroy its sandbox (its log and turns stay)')
    .argument('<id>', 'conversation id')
    .action(async (id: string) => {
      const conv = await whileProvisioning(ctx, () =>
        ctx.client().request<Conversation>('POST', `${conversationPath(id)}/terminate`),
      );
      if (ctx.format() === 'json') print(json(conv));
      else print(`terminated conversation ${id}`);
    });
}

/** Deletes a conversation, its sandbox, turns and log (`paddock delete <id>`). */
export async function deleteConversation(ctx: CommandContext, id: string): Promise<void> {
  await ctx.client().request('DELETE', conversationPath(id));
  if (ctx.format() === 'json') ctx.print(json({ deleted: id }));
  else ctx.print(`deleted conversation ${id}`);
}

/** A command's exit status other than 0 without an error message (the turn's exit code). */
export class ExitStatus extends Error {
  readonly code: number;
  constructor(code: number) {
    super(`exit ${code}`);
    this.name = 'ExitStatus';
    this.code = code;
  }
}
