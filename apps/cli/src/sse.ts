// An incremental parser of the text/event-stream format (WHATWG HTML, "Server-sent events"):
// chunks go in as they arrive off the socket, whole events come out. Bytes are decoded as
// UTF-8 with a streaming decoder, so a character split across two reads stays whole.
//
// What must hold (tests in sse.test.ts):
// - an event is dispatched only at its blank line: a connection that drops mid-event yields
//   nothing for it, so the caller's Last-Event-ID is the last event it fully received;
// - `id:` persists until changed (the spec's "last event ID"), `data:` lines join with "\n",
//   comments (`: heartbeat`) are reported so a caller can tell a live idle stream from a dead one;
// - LF, CRLF and CR line ends are all accepted, also when CR and LF arrive in different reads.

export interface SseEvent {
  /** The event's `id:` (or the last one seen on this connection); '' when none was ever sent. */
  id: string;
  /** `event:`; 'message' when absent. */
  event: string;
  data: string;
}

export interface SseParser {
  /** Feeds bytes; calls back for each complete event and each comment line. */
  push(chunk: Uint8Array): void;
}

export function createSseParser(handlers: {
  event(event: SseEvent): void;
  comment?(text: string): void;
}): SseParser {
  const decoder = new TextDecoder('utf-8');
  let buffer = '';
  let lastId = '';
  let eventType = '';
  let data: string[] = [];
  let hasData = false;
  let skipLf = false;

  const line = (text: string): void => {
    if (text === '') {
      if (hasData) handlers.event({ id: lastId, event: eventType || 'message', data: data.join('\n') });
      eventType = '';
      data = [];
      hasData = false;
      return;
    }
    if (text.startsWith(':')) {
      handlers.comment?.(text.slice(1).trimStart());
      return;
    }
    const colon = text.indexOf(':');
    const field = colon === -1 ? text : text.slice(0, colon);
    let value = colon === -1 ? '' : text.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') {
      data.push(value);
      hasData = true;
    } else if (field === 'event') eventType = value;
    else if (field === 'id' && !value.includes('\0')) lastId = value;
    // `retry:` and unknown fields are ignored: the follower keeps its own backoff.
  };

  return {
    push(chunk) {
      buffer += decoder.decode(chunk, { stream: true });
      let start = 0;
      for (let i = 0; i < buffer.length; i++) {
        const c = buffer.charCodeAt(i);
        if (c === 10 && skipLf && i === start) {
          // the LF of a CRLF whose CR ended the previous read
          skipLf = false;
          start = i + 1;
          continue;
        }
        skipLf = false;
        if (c === 10 || c === 13) {
          line(buffer.slice(start, i));
          if (c === 13) {
            if (i + 1 < buffer.length) {
              if (buffer.charCodeAt(i + 1) === 10) i++;
            } else skipLf = true;
          }
          start = i + 1;
        }
      }
      buffer = buffer.slice(start);
    },
  };
}
