// The protocol-neutral response → ModelInferResponse, with Triton's layout: tensors as raw_output_contents (or as
// typed contents when the request sent typed contents), text_output flat — Triton's postprocessing returns one
// string per batch element and beam, and its clients read it as `as_numpy("text_output")[0].decode()`.
import type { OutputTensor } from '../model-run.js';
import { encodeContents, encodeRaw } from './tensor-codec.js';
import type { ModelInferResponse, Parameters, WireTensor } from './wire-types.js';

export interface ResponseHeader { modelName: string; modelVersion: string; id?: string | undefined }

function wireShape(t: OutputTensor): number[] {
  return t.name === 'text_output' ? [t.data.length] : t.shape;
}

export function encodeInferResponse(header: ResponseHeader, outputs: readonly OutputTensor[], raw: boolean, parameters?: Parameters): ModelInferResponse {
  const tensors: WireTensor[] = outputs.map((t) => ({
    name: t.name, datatype: t.datatype, shape: wireShape(t), ...(raw ? {} : { contents: encodeContents(t.datatype, t.data) }),
  }));
  return {
    model_name: header.modelName,
    model_version: header.modelVersion,
    id: header.id ?? '',
    outputs: tensors,
    ...(raw ? { raw_output_contents: outputs.map((t) => encodeRaw(t.datatype, t.data)) } : {}),
    ...(parameters ? { parameters } : {}),
  };
}

/** triton_final_response: on every response of a decoupled model, true on the request's last one. */
export function finalFlag(final: boolean): Parameters {
  return { triton_final_response: { bool_param: final } };
}
