// Server-sent events framing (https://html.spec.whatwg.org/multipage/server-sent-events.html).
// Every `data:` here is one line of JSON (JSON.stringify escapes newlines), so an event never
// needs multi-line data and a field can never smuggle in a second event.

export function sseEvent(event: string, data: unknown, id?: string): string {
  return `${sseHead(event, id)}${JSON.stringify(data)}\n\n`;
}

const sseHead = (event: string, id: string | undefined): string =>
  `${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: `;

/**
 * sseEvent(event, {...data, [key]: text}, id) in parts, the text's JSON string on its own: a
 * caller that encodes the parts one after another never joins a long text into one string.
 */
export function sseEventParts(
  event: string,
  data: Record<string, unknown>,
  key: string,
  text: string,
  id?: string,
): readonly string[] {
  return [
    `${sseHead(event, id)}${JSON.stringify(data).slice(0, -1)},${JSON.stringify(key)}:`,
    JSON.stringify(text),
    '}\n\n',
  ];
}

/** A comment line: keeps proxies and clients from timing out an idle stream. */
export const SSE_PING = ': ping\n\n';

/** Sent first: EventSource clients reconnect after 2 s (then resume with Last-Event-ID). */
export const SSE_RETRY = 'retry: 2000\n\n';

/** Response headers of an event stream (no caching, no proxy buffering). */
export const SSE_HEADERS = {
  'content-type': 'text/event-stream; charset=utf-8',
  'cache-control': 'no-cache, no-transform',
  'x-accel-buffering': 'no',
} as const;
