// Loads the KServe v2 .proto once for whoever speaks gRPC here (the server, the client tool, the bench). The file
// ships beside this module's source, so it is found from the package root, not from dist/.
import { join } from 'node:path';

import { loadPackageDefinition, type ServiceClientConstructor } from '@grpc/grpc-js';
import { loadSync, type Options } from '@grpc/proto-loader';

import { packageRoot } from '../../common/package-root.js';

/**
 * How messages look in JS (see wire-types.ts): proto field names, int64 as number, bytes as Buffer, unset fields
 * absent (no defaults: filling every field of every message costs more than the readers' `?? []`).
 */
export const PROTO_OPTIONS: Options = { keepCase: true, longs: Number, enums: String, bytes: Buffer, defaults: false, oneofs: true };

export function protoPath(): string {
  return join(packageRoot(), 'worker', 'frontend', 'grpc', 'kserve-v2.proto');
}

let cached: ServiceClientConstructor | undefined;

/** inference.GRPCInferenceService: `.service` for a server, `new (address, credentials)` for a client. */
export function inferenceService(): ServiceClientConstructor {
  if (!cached) {
    const pkg = loadPackageDefinition(loadSync(protoPath(), PROTO_OPTIONS)) as unknown as { inference: { GRPCInferenceService: ServiceClientConstructor } };
    cached = pkg.inference.GRPCInferenceService;
  }
  return cached;
}
