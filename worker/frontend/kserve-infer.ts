// POST /v2/models/{name}[/versions/{v}]/infer: KServe v2 JSON tensors in and out, with Triton's tensor names (inputs
// and outputs also as binary data: binary-inputs.ts, binary-outputs.ts). This file only reads the body and writes the
// answer; the request itself runs in kserve-infer-request.ts, which gRPC's ModelInfer shares.
import { describeValue } from '../common/errors.js';
import { BINARY_HEADER, BinaryData, inputTensor, splitBinaryBody } from './binary-inputs.js';
import { binaryOutputChoice, sendBinaryAnswer } from './binary-outputs.js';
import { badRequest } from './http-errors.js';
import type { Route } from './http-server.js';
import { type InferRequest, inferWhole, namedInputs } from './kserve-infer-request.js';
import { answerSettled, sendAnswer } from './logits-json.js';
import type { ModelCatalog } from './model-catalog.js';

/** The JSON body's id, inputs and requested outputs, decoded and checked; `binary`: the bytes after the JSON of a
 * binary body (binary-inputs.ts). */
export function inferInputs(body: Record<string, unknown>, binary?: Buffer): Pick<InferRequest, 'id' | 'inputs' | 'outputs'> {
  const { id, inputs, outputs } = body;
  if (id !== undefined && typeof id !== 'string') throw badRequest(`id must be a string, got ${describeValue(id)}`, 'id');
  if (!Array.isArray(inputs)) throw badRequest(`inputs must be an array of tensors, got ${describeValue(inputs)}`, 'inputs');
  const data = binary === undefined ? undefined : new BinaryData(binary);
  const values = namedInputs(inputs.map((tensor, i) => inputTensor(tensor, i, data)));
  data?.finish();
  let wanted: Set<string> | undefined;
  if (outputs !== undefined) {
    if (!Array.isArray(outputs)) throw badRequest(`outputs must be an array of {"name": ...}, got ${describeValue(outputs)}`, 'outputs');
    wanted = new Set(outputs.map((o, i) => {
      const name = (o as { name?: unknown } | null)?.name;
      if (typeof name !== 'string') throw badRequest(`outputs[${i}].name must be a string, got ${describeValue(name)}`, 'outputs');
      return name;
    }));
  }
  return { id, inputs: values, ...(wanted ? { outputs: wanted } : {}) };
}

export function inferRoutes(catalog: ModelCatalog): Route[] {
  return [{
    method: 'POST', path: /^\/v2\/models\/([^/]+)(?:\/versions\/([^/]+))?\/infer$/, style: 'kserve',
    handle: async (c) => {
      catalog.resolve(c.params[0]!, c.params[1]);  // an unknown model is a 404 before the body is read
      const jsonLength = c.req.headers[BINARY_HEADER];
      const { json: body, data } = typeof jsonLength === 'string' ? splitBinaryBody(await c.raw(), jsonLength) : { json: await c.json(), data: undefined };
      const binary = binaryOutputChoice(body);
      const request = { modelName: c.params[0]!, modelVersion: c.params[1], ...inferInputs(body, data) };
      const response = await inferWhole(catalog, request, c.signal, () => answerSettled(c.res));
      if (c.signal.aborted) return;
      const header = {
        model_name: response.modelName,
        model_version: response.modelVersion,
        ...(response.id === undefined ? {} : { id: response.id }),
        ...(response.parameters ? { parameters: response.parameters } : {}),
      };
      if (response.outputs.some((o) => binary(o.name))) return sendBinaryAnswer(c.res, header, response.outputs, binary);
      await sendAnswer(c.res, 200, { ...header, outputs: response.outputs });
    },
  }];
}
