// A client's text inside an error message, cut short: a name or value is echoed so the client sees what it sent,
// but never whole — a 100,000-character model name in a gRPC status (the grpc-message trailer) cannot be sent at
// all, and one long echo should not make every error that mentions it long. The cut says how long the text was.

/** How much of a client's text an error message echoes (UTF-16 code units, as String.length counts). */
export const QUOTE_LIMIT = 200;

/** `text` cut to about `limit` characters, never between the two halves of a surrogate pair (a lone half cannot be
 * encoded as UTF-8 or percent-encoding); `cut` is false when it is whole. */
export function clipText(text: string, limit = QUOTE_LIMIT): { head: string; cut: boolean } {
  if (text.length <= limit) return { head: text, cut: false };
  let end = limit;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end -= 1;
  return { head: text.slice(0, end), cut: true };
}

/** A client's name in an error message: `'ensemble'`, or `'xxxx…' (100000 characters)` when it is long.
 * `quote`: the mark around it (OpenAI's messages use backticks). */
export function quoteName(name: string, quote = "'"): string {
  const { head, cut } = clipText(name);
  return cut ? `${quote}${head}…${quote} (${name.length} characters)` : `${quote}${name}${quote}`;
}
