// The gRPC port: a grpc-js server with the inference service, bound like the HTTP port (host, port 0 for any free
// one), with --max-body-bytes as its largest request message, and a drain in steps: refuse new work while listening
// (beginDrain), wait for the calls in progress (settled), then stop.
import { Server, ServerCredentials, type ServiceDefinition } from '@grpc/grpc-js';

import { TrtllmError } from '../../common/errors.js';
import { tolerantDeserializer } from './decode-request.js';
import { OpenCalls } from './open-calls.js';
import { inferenceService } from './proto.js';
import { type GrpcServiceOptions, type GrpcServing, inferenceHandlers } from './service.js';

export interface GrpcServerOptions extends GrpcServiceOptions {
  host: string;
  port: number;
  maxMessageBytes: number;
}

export interface RunningGrpcServer {
  port: number;
  /** Keeps listening, but refuses new streams with UNAVAILABLE naming `refusal`, and ends each open stream with it
   * once its requests are answered (unary calls are refused by the models' readiness, with the same words). */
  beginDrain(refusal: string): void;
  /** Resolves once no call is open. */
  settled(): Promise<void>;
  /** Stops listening; resolves once the transport's sessions have closed. */
  drain(): Promise<void>;
  /** Ends every call still open. */
  close(): void;
}

/** The service with every request deserializer tolerant: undecodable bytes reach the handler, which answers
 * INVALID_ARGUMENT (decode-request.ts), instead of grpc-js answering INTERNAL. */
function tolerantService(service: ServiceDefinition): ServiceDefinition {
  return Object.fromEntries(Object.entries(service).map(([name, method]) => [
    name, { ...method, requestDeserialize: tolerantDeserializer(name, method.requestDeserialize) },
  ])) as ServiceDefinition;
}

function address(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

export async function startGrpcServer(serving: GrpcServing, options: GrpcServerOptions): Promise<RunningGrpcServer> {
  const server = new Server({
    'grpc.max_receive_message_length': options.maxMessageBytes,
    'grpc.max_send_message_length': -1,   // logits can be large; the client sets its own limit
    // channelz stays on (its default): grpc-js tracks the sessions that forceShutdown must end only through it.
  });
  const calls = new OpenCalls();
  server.addService(tolerantService(inferenceService().service), inferenceHandlers(serving, options, calls));
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(address(options.host, options.port), ServerCredentials.createInsecure(), (error, bound) => {
      if (error) {
        reject(new TrtllmError(`--grpc-port ${options.port} on ${options.host} cannot be bound (${error.message}); another server may hold it: stop it or pick another port`, 'invalid_argument'));
      } else resolve(bound);
    });
  });
  let drained: Promise<void> | undefined;
  return {
    port,
    beginDrain: (refusal) => calls.beginDrain(refusal),
    settled: () => calls.settled(),
    drain: () => (drained ??= new Promise((resolve) => server.tryShutdown(() => resolve()))),
    close: () => server.forceShutdown(),
  };
}
