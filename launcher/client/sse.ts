// Server-sent events read from a fetch body: generate_stream sends one `data: <json>` event per iteration.
// The framing is pure (splitSseEvents) so partial chunks are testable without a server.

/** Complete events in `buffer` (their data payloads) and the incomplete tail to keep for the next chunk. */
export function splitSseEvents(buffer: string): { events: string[]; rest: string } {
  const normalized = buffer.replace(/\r\n/g, '\n');
  const parts = normalized.split('\n\n');
  const rest = parts.pop() ?? '';
  const events: string[] = [];
  for (const part of parts) {
    // An event may span several data: lines (joined by newlines); comments (":") and other fields are ignored.
    const data = part.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(l.startsWith('data: ') ? 6 : 5));
    if (data.length > 0) events.push(data.join('\n'));
  }
  return { events, rest };
}

/** Parsed JSON payloads of a text/event-stream body, as they arrive. */
export async function* readSse(body: ReadableStream<Uint8Array>): AsyncGenerator<unknown> {
  const decoder = new TextDecoder();
  let buffer = '';
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buffer += decoder.decode(chunk, { stream: true });
    const { events, rest } = splitSseEvents(buffer);
    buffer = rest;
    for (const e of events) yield parseEvent(e);
  }
  const { events } = splitSseEvents(`${buffer}${decoder.decode()}\n\n`);
  for (const e of events) yield parseEvent(e);
}

function parseEvent(data: string): unknown {
  try {
    return JSON.parse(data);
  } catch {
    return data;   // OpenAI's "[DONE]" and the like
  }
}
