// The engine compiles a guide when the request is enqueued and rejects a bad one (invalid_argument: `json_schema:
// unsupported keyword "patternProperties" at /properties/x`); this rewords such a rejection so it names the request
// field the client used (response_format, guided_regex, guided_decoding_guide, ...) and stays a 400. An engine built
// without guided decoding (its request validation does not know `guidedDecoding`) is reported as exactly that.
import { TrtllmError } from '../../common/errors.js';
import { HttpError } from '../http-errors.js';

/** Where a request's guide came from: the field to name, and OpenAI's `param`. */
export interface GuideSource {
  field: string;
  typeField?: string;   // where the guide's type was given, when that is a field of its own (KServe)
  param?: string;
  paths?: readonly (readonly [string, string])[];   // JSON Pointer prefixes of a built guide → the client's names
}

/** `message` with each JSON Pointer that starts with one of `paths`' prefixes (after a space, quote or bracket) told
 * in the client's terms: `/anyOf/1/properties/arguments/properties/x` → `tools[1].function.parameters/properties/x`. */
function clientPaths(message: string, paths: GuideSource['paths']): string {
  let out = message;
  for (const [from, to] of [...(paths ?? [])].sort((a, b) => b[0].length - a[0].length)) {
    const escaped = from.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    out = out.replace(new RegExp(`(^|[\\s'"(])${escaped}(?=/|$|[\\s'",):])`, 'g'), (_m, lead: string) => `${lead}${to}`);
  }
  return out;
}

const ABOUT_GUIDE = /^(json|json_schema|regex|ebnf_grammar)\b|guidedDecoding|guided decoding|grammar/i;
// The engine's request validation predates guided decoding, or the executor has no token vocabulary for it.
const NOT_BUILT = /unknown parameter '?guidedDecoding|guided-decoding vocabulary/;

/** The error to report for `error`, thrown while a request guided by `source` was enqueued or ran. */
export function guideError(error: unknown, source: GuideSource | undefined): unknown {
  if (!source || !(error instanceof TrtllmError)) return error;
  if (NOT_BUILT.test(error.message) || (error.code === 'unsupported' && ABOUT_GUIDE.test(error.message))) {
    return new HttpError(400, `${source.field}: guided decoding is not supported by this server's engine (${error.message})`, source.param);
  }
  if ((error.code === 'invalid_argument' || error.code === 'unsupported') && ABOUT_GUIDE.test(error.message)) {
    const message = clientPaths(error.message, source.paths)
      .replaceAll(/guidedDecoding\.guideType|guideType/g, source.typeField ?? source.field)
      .replaceAll(/guidedDecoding(\.guide)?/g, source.field);
    return new HttpError(400, message.startsWith(source.field) ? message : `${source.field}: ${message}`, source.param);
  }
  return error;
}

/** Runs `fn` (an enqueue), rewording a guide rejection. */
export function withGuideErrors<T>(fn: () => T, source: GuideSource | undefined): T {
  try {
    return fn();
  } catch (error) {
    throw guideError(error, source);
  }
}

/** `items`, with a guide rejection that arrives in the response stream reworded too. */
export async function* guideErrorsIn<T>(items: AsyncIterable<T>, source: GuideSource | undefined): AsyncGenerator<T> {
  try {
    yield* items;
  } catch (error) {
    throw guideError(error, source);
  }
}
