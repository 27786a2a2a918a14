// paddock usage: the account's usage in a range (GET /api/account/usage), this month (UTC) by
// default: sandbox hours busy (a turn running) and parked (ready and idle), turns, tokens and
// cost, then per runtime and model. The range rules are the server's; its 400 is printed as is.
import type { Command } from 'commander';
import type { CommandContext } from './conversations.ts';
import { json, table } from './output.ts';

interface Tokens {
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cost_usd: number | null;
}

interface Usage {
  from: string;
  to: string;
  sandboxes: { count: number; failed_before_ready: number; busy_seconds: number; parked_seconds: number };
  turns: Tokens & { count: number };
  by_model: (Tokens & { runtime: string | null; model: string | null; turns: number })[];
}

const hours = (seconds: number) => `${(seconds / 3600).toFixed(2)} h`;
const count = (n: number) => n.toLocaleString('en-US');
const cost = (usd: number | null) => (usd === null ? 'not reported' : `$${usd.toFixed(4)}`);
/** A range bound as given: a date at midnight UTC prints as the date. */
const bound = (iso: string) => iso.replace(/T00:00:00\.000Z$/, '');

export function renderUsage(u: Usage): string {
  const s = u.sandboxes;
  const t = u.turns;
  const lines = [
    `Usage from ${bound(u.from)} to ${bound(u.to)} (UTC, events that ended in the range)`,
    table(
      ['', ''],
      [
        ['Sandboxes', `${count(s.count)} (${count(s.failed_before_ready)} failed before ready)`],
        ['Busy', hours(s.busy_seconds)],
        ['Parked', hours(s.parked_seconds)],
        ['Turns', count(t.count)],
        [
          'Tokens',
          `${count(t.input_tokens)} in, ${count(t.output_tokens)} out, ${count(t.cache_read_tokens)} cache read`,
        ],
        ['Cost', cost(t.cost_usd)],
      ],
    )
      .split('\n')
      .slice(1)
      .join('\n'),
  ];
  if (u.by_model.length > 0)
    lines.push(
      '',
      table(
        ['RUNTIME', 'MODEL', 'TURNS', 'INPUT', 'OUTPUT', 'CACHE READ', 'COST'],
        u.by_model.map((m) => [
          m.runtime ?? '-',
          m.model ?? '-',
          count(m.turns),
          count(m.input_tokens),
          count(m.output_tokens),
          count(m.cache_read_tokens),
          cost(m.cost_usd),
        ]),
      ),
    );
  return lines.join('\n');
}

export function registerUsageCommand(program: Command, ctx: CommandContext): void {
  const { client, format, print } = ctx;
  program
    .command('usage')
    .description(
      "the account's usage: sandbox hours busy and parked, turns, tokens and cost (this month, UTC, by default)",
    )
    .option('--from <date>', 'start of the range, an ISO date (2026-11-01) or date-time')
    .option('--to <date>', 'end of the range, exclusive (alone or with --from only: that month)')
    .allowExcessArguments(false)
    .action(async (opts: { from?: string; to?: string }) => {
      const query = new URLSearchParams();
      if (opts.from !== undefined) query.set('from', opts.from);
      if (opts.to !== undefined) query.set('to', opts.to);
      const qs = query.size > 0 ? `?${query}` : '';
      const usage = await client().request<Usage>('GET', `/api/account/usage${qs}`);
      print(format() === 'json' ? json(usage) : renderUsage(usage));
    });
}
