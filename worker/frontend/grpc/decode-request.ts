// ModelInferRequest → the protocol-neutral InferRequest: each input's data from its typed contents or from its
// raw_input_contents entry, checked like an HTTP tensor (datatype, shape against element count, element values),
// and the request parameters Triton reserves. Every rejection names the input or field and what was received.
import { describeValue } from '../../common/errors.js';
import { clipText, quoteName } from '../../common/quote-value.js';
import { badRequest } from '../http-errors.js';
import { type InferRequest, namedInputs } from '../kserve-infer-request.js';
import { checkTensor } from '../named-values.js';
import { decodeContents, decodeRaw } from './tensor-codec.js';
import type { InferTensorContents, ModelInferRequest } from './wire-types.js';

export interface DecodedRequest {
  request: InferRequest;
  rawOutputs: boolean;   // answer in raw_output_contents (as Triton does), unless the request used typed contents
  emptyFinal: boolean;   // triton_enable_empty_final_response: the final flag goes on an empty response of its own
}

function hasContents(contents: InferTensorContents | null | undefined): boolean {
  return contents != null && Object.values(contents).some((v) => Array.isArray(v) && v.length > 0);
}

const EMPTY_FINAL = 'triton_enable_empty_final_response';

/**
 * A request message protobuf could not decode. A grpc-js deserializer that throws makes the call end INTERNAL
 * ("Error deserializing request") before any handler runs, as if the server were at fault; so the server's
 * deserializers hand this over instead (tolerantDeserializer), and the handlers answer INVALID_ARGUMENT with it.
 */
export class UndecodableMessage {
  constructor(readonly method: string, readonly bytes: number, readonly reason: string) {}

  get message(): string {
    return `the ${this.method} request is not a valid protobuf message (${this.bytes} bytes; ${clipText(this.reason).head})`;
  }
}

/** `deserialize`, answering bytes it cannot decode with an UndecodableMessage instead of an exception. */
export function tolerantDeserializer<T>(method: string, deserialize: (bytes: Buffer) => T): (bytes: Buffer) => T | UndecodableMessage {
  return (bytes) => {
    try {
      return deserialize(bytes);
    } catch (error) {
      return new UndecodableMessage(method, bytes.length, error instanceof Error ? error.message : String(error));
    }
  };
}

export function decodeInferRequest(m: ModelInferRequest | UndecodableMessage): DecodedRequest {
  if (m instanceof UndecodableMessage) throw badRequest(m.message);
  const inputs = m.inputs ?? [];
  const raw = m.raw_input_contents ?? [];
  if (raw.length > 0 && raw.length !== inputs.length) {
    throw badRequest(`raw_input_contents has ${raw.length} entries for ${inputs.length} inputs; send one per input, in the inputs' order`, 'raw_input_contents');
  }
  let typed = false;
  const values = namedInputs(inputs.map((t, i) => {
    const name = t.name;
    if (!name) throw badRequest(`inputs[${i}].name must be a non-empty string, got ${describeValue(name)}`, 'inputs');
    let data: unknown[] | Float32Array;
    if (raw.length > 0) {
      if (hasContents(t.contents)) throw badRequest(`input ${quoteName(name)} has both contents and raw_input_contents[${i}]; send one of them`, name);
      data = decodeRaw(t.datatype, raw[i]!, name, `raw_input_contents[${i}]`);
    } else {
      typed ||= hasContents(t.contents);
      data = decodeContents(t.datatype, t.contents, name);
    }
    return [name, checkTensor(name, t.datatype, (t.shape ?? []).map(Number), data)] as const;
  }));
  const parameters = m.parameters ?? {};
  const emptyFinal = parameters[EMPTY_FINAL];
  if (emptyFinal !== undefined && emptyFinal.parameter_choice !== 'bool_param') {
    throw badRequest(`invalid value type for '${EMPTY_FINAL}' parameter, expected bool_param, got ${emptyFinal.parameter_choice ?? 'nothing'}`, EMPTY_FINAL);
  }
  const wanted = (m.outputs ?? []).map((o, i) => {
    if (!o.name) throw badRequest(`outputs[${i}].name must be a non-empty string, got ${describeValue(o.name)}`, 'outputs');
    return o.name;
  });
  return {
    request: {
      modelName: m.model_name ?? '',
      modelVersion: m.model_version || undefined,
      id: m.id || undefined,
      inputs: values,
      ...(wanted.length > 0 ? { outputs: new Set(wanted) } : {}),
    },
    rawOutputs: !typed,
    emptyFinal: emptyFinal?.bool_param === true,
  };
}
