// Text <-> token ids for the client tools: a local tokenizer when --tokenizer-dir is given (as Triton's clients
// take one), otherwise the server's own preprocessing and postprocessing models, so a client needs nothing but
// the URL and always tokenizes exactly as the server does (over HTTP or gRPC).
import { loadTokenizer } from '../../worker/tokenizer.js';
import { postJson } from './http.js';
import { ToolError } from './tool-error.js';

export interface TextCodec {
  encode(texts: string[]): Promise<number[][]>;
  decode(rows: number[][]): Promise<string[]>;
}

interface InferOutput { name: string; datatype: string; shape: number[]; data: unknown[] }

function output(outputs: InferOutput[], name: string, url: string): InferOutput {
  const found = outputs.find((o) => o.name === name);
  if (!found) throw new ToolError(`${url} returned no ${name} output`);
  return found;
}

export function localCodec(tokenizerDir: string): TextCodec {
  // Loaded on first use: token-id traffic never needs it, and a config-only directory (--load-format dummy) has none.
  let tokenizer: ReturnType<typeof loadTokenizer> | undefined;
  const get = () => (tokenizer ??= loadTokenizer(tokenizerDir));
  return {
    encode: async (texts) => texts.map((t) => get().encode(t)),
    decode: async (rows) => rows.map((ids) => get().decode(ids)),
  };
}

/** Runs one inference on a model of the server: its inputs in, its outputs back (over HTTP or gRPC). */
export type InferFn = (model: string, inputs: InferOutput[]) => Promise<InferOutput[]>;

export function serverCodec(base: string): TextCodec {
  return serverCodecVia(async (model, inputs) => {
    const body = await postJson(`${base}/v2/models/${model}/infer`, { inputs }) as { outputs?: InferOutput[] };
    return body.outputs ?? [];
  }, base);
}

export function serverCodecVia(infer: InferFn, where = 'the server'): TextCodec {
  return {
    async encode(texts) {
      const url = `${where} preprocessing`;
      const outputs = await infer('preprocessing', [
        { name: 'QUERY', datatype: 'BYTES', shape: [texts.length, 1], data: texts },
        { name: 'REQUEST_OUTPUT_LEN', datatype: 'INT32', shape: [texts.length, 1], data: texts.map(() => 1) },
      ]);
      const ids = output(outputs, 'INPUT_ID', url);
      const lengths = output(outputs, 'REQUEST_INPUT_LEN', url).data as number[];
      const width = ids.shape[ids.shape.length - 1]!;
      // Rows come back padded to the longest; REQUEST_INPUT_LEN says where each really ends.
      return texts.map((_, i) => (ids.data as number[]).slice(i * width, i * width + lengths[i]!));
    },
    async decode(rows) {
      // Empty rows (a request stopped before its first token) decode to "" without asking the server.
      const full = rows.map((r, i) => [r, i] as const).filter(([r]) => r.length > 0);
      const texts = rows.map(() => '');
      if (full.length === 0) return texts;
      const url = `${where} postprocessing`;
      const width = Math.max(...full.map(([r]) => r.length));
      const padded = full.flatMap(([r]) => [...r, ...new Array<number>(width - r.length).fill(0)]);
      const outputs = await infer('postprocessing', [
        { name: 'TOKENS_BATCH', datatype: 'INT32', shape: [full.length, 1, width], data: padded },
        { name: 'SEQUENCE_LENGTH', datatype: 'INT32', shape: [full.length, 1], data: full.map(([r]) => r.length) },
      ]);
      const decoded = output(outputs, 'OUTPUT', url).data as string[];
      full.forEach(([, i], k) => { texts[i] = decoded[k]!; });
      return texts;
    },
  };
}
