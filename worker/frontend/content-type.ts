// Which request bodies the JSON endpoints read, by Content-Type — the guard against cross-site requests. A web page
// can make its visitor's browser POST to this server without a CORS preflight only with a "simple" request: a body
// typed text/plain, multipart/form-data or application/x-www-form-urlencoded, or untyped. Served as JSON, such a
// request starts a generation on the visitor's machine or network (a server without --api-key trusts its network).
//
// The policy:
//   - JSON (application/json, any application/*+json; parameters such as charset allowed): always read.
//   - untyped, or application/x-www-form-urlencoded: read unless a browser sent it (an Origin or Sec-Fetch-Site
//     header; browsers put Origin on every cross-origin POST, curl and the HTTP libraries send neither). This is what
//     `curl -d` sends, and the seeds' and Triton's documented commands are `curl -X POST ... -d '{...}'`: a newcomer's
//     first request keeps working. A form cannot forge JSON in this encoding (its serializer percent-encodes `{` and
//     `"`), and a script's no-cors fetch or sendBeacon carries Origin, so the browser case is the one refused.
//   - anything else (text/plain — what an HTML form can shape into JSON, and what fetch() gives a string body —,
//     multipart/form-data, ...): 415, naming the type received and the header to send.
// --allow-any-content-type reads every body as JSON, whatever its type and sender (the behaviour before this check).
import type { IncomingHttpHeaders } from 'node:http';

import { clipText } from '../common/quote-value.js';
import { HttpError } from './http-errors.js';

const JSON_TYPE = /^application\/(?:[\w.+-]+\+)?json$/;
const CURL_DEFAULT = 'application/x-www-form-urlencoded';

/** The media type of a Content-Type value, lower-cased, without its parameters ('' when absent). */
export function mediaType(header: string | undefined): string {
  if (header === undefined) return '';
  const semicolon = header.indexOf(';');
  return (semicolon < 0 ? header : header.slice(0, semicolon)).trim().toLowerCase();
}

/** Throws a 415 unless the request's body may be read as JSON (the policy above). */
export function checkJsonContentType(headers: IncomingHttpHeaders, path: string): void {
  const type = mediaType(headers['content-type']);
  if (JSON_TYPE.test(type)) return;
  const browser = headers.origin !== undefined || headers['sec-fetch-site'] !== undefined;
  if ((type === '' || type === CURL_DEFAULT) && !browser) return;
  const received = headers['content-type'] === undefined ? 'no Content-Type' : `Content-Type ${JSON.stringify(clip(headers['content-type']))}`;
  const from = browser ? ` from a browser page (Origin ${JSON.stringify(clip(headers.origin ?? 'not sent'))})` : '';
  throw new HttpError(415, `${clip(path)} reads a JSON body, got ${received}${from}: send the header "Content-Type: application/json" ` +
    '(curl: -H \'Content-Type: application/json\'), or start the server with --allow-any-content-type');
}

// The shared cut (quote-value.ts), marked as the other echoes are.
function clip(text: string): string {
  const { head, cut } = clipText(text);
  return cut ? `${head}… (${text.length} characters)` : text;
}
