// The KServe v2 gRPC messages as @grpc/proto-loader hands them over with PROTO_OPTIONS (proto field names,
// int64 as number, bytes as Buffer, enums as names, oneofs named by a virtual field, unset fields absent: so every
// field is optional to a reader, whatever the type says). Only the fields we use.

export interface InferParameter {
  bool_param?: boolean;
  int64_param?: number;
  string_param?: string;
  double_param?: number;
  uint64_param?: number;
  parameter_choice?: 'bool_param' | 'int64_param' | 'string_param' | 'double_param' | 'uint64_param';
}
export type Parameters = Record<string, InferParameter>;

export interface InferTensorContents {
  bool_contents?: boolean[];
  int_contents?: number[];
  int64_contents?: number[];
  uint_contents?: number[];
  uint64_contents?: number[];
  fp32_contents?: number[];
  fp64_contents?: number[];
  bytes_contents?: Buffer[];
}

export interface WireTensor {
  name: string;
  datatype: string;
  shape: number[];
  parameters?: Parameters;
  contents?: InferTensorContents | null;
}

export interface ModelInferRequest {
  model_name: string;
  model_version: string;
  id: string;
  parameters?: Parameters;
  inputs: WireTensor[];
  outputs: { name: string; parameters?: Parameters }[];
  raw_input_contents: Buffer[];
}

export interface ModelInferResponse {
  model_name: string;
  model_version: string;
  id: string;
  parameters?: Parameters;
  outputs: WireTensor[];
  raw_output_contents?: Buffer[];
}

export interface ModelStreamInferResponse {
  error_message?: string;
  infer_response?: ModelInferResponse;
}
