// A bare grpc-js client of inference.GRPCInferenceService for tests that look at the wire itself (status codes and
// messages, response parameters, undecodable bytes): built here from the shipped .proto with proto-loader, its
// tensors encoded here (typed contents), so nothing of the server's own codec is under test twice.
import { join } from 'node:path';

import { type Client, credentials, loadPackageDefinition, Metadata, type ServiceClientConstructor, type ServiceError } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';

import { packageRoot } from '../../worker/common/package-root.js';

export type KserveClient = Client & Record<string, any>;

export interface Tensor { name: string; datatype: 'INT32' | 'UINT32' | 'BOOL' | 'BYTES' | 'FP32'; shape: number[]; data: any[] }

const FIELD = { BOOL: 'bool_contents', INT32: 'int_contents', UINT32: 'uint_contents', FP32: 'fp32_contents', BYTES: 'bytes_contents' } as const;

let service: ServiceClientConstructor | undefined;

/** A client on its own channel (one HTTP/2 connection) to `address`; closed at the test's teardown. */
export function kserveClient(t: { teardown(fn: () => unknown): void }, address: string): KserveClient {
  service ??= (loadPackageDefinition(loadSync(join(packageRoot(), 'worker', 'frontend', 'grpc', 'kserve-v2.proto'),
    { keepCase: true, longs: Number, enums: String, bytes: Buffer, defaults: true, oneofs: true })) as any).inference.GRPCInferenceService as ServiceClientConstructor;
  const client = new service(address, credentials.createInsecure()) as KserveClient;
  t.teardown(() => client.close());
  return client;
}

/** A ModelInferRequest with typed contents. */
export function inferRequest(model: string, inputs: Tensor[], extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    model_name: model, ...extra,
    inputs: inputs.map((i) => ({
      name: i.name, datatype: i.datatype, shape: i.shape,
      contents: { [FIELD[i.datatype]]: i.datatype === 'BYTES' ? i.data.map((s: string) => Buffer.from(s)) : i.data },
    })),
  };
}

export function unary(c: KserveClient, method: string, request: unknown): Promise<any> {
  return new Promise((resolve, reject) => c[method](request, new Metadata(), (e: ServiceError | null, r: unknown) => (e ? reject(e) : resolve(r))));
}

/** The status a call ended with; throws if it succeeded. */
export async function rejected(c: KserveClient, method: string, request: unknown): Promise<ServiceError> {
  try {
    await unary(c, method, request);
  } catch (e) {
    return e as ServiceError;
  }
  throw new Error(`${method} succeeded`);
}

/** A unary call whose request is `bytes` as they are (no serializer): how a peer sends what protobuf cannot decode. */
export function rawUnary(c: KserveClient, method: string, bytes: Buffer): Promise<ServiceError | null> {
  return new Promise((resolve) => {
    c.makeUnaryRequest(`/inference.GRPCInferenceService/${method}`, (b: Buffer) => b, (b: Buffer) => b, bytes,
      (e: ServiceError | null) => resolve(e));
  });
}

/** The tensors of a response by name, from typed contents. */
export function outputsByName(response: any): Record<string, { shape: number[]; data: any[] }> {
  return Object.fromEntries((response.outputs ?? []).map((o: any) => {
    const field = FIELD[o.datatype as keyof typeof FIELD];
    const data = o.datatype === 'BYTES' ? o.contents[field].map((b: Buffer) => b.toString()) : o.contents[field];
    return [o.name, { shape: o.shape, data }];
  }));
}

export const isFinal = (r: any): boolean | undefined => r.infer_response?.parameters?.triton_final_response?.bool_param;
