// launch_triton_server.py's flag spellings, so Triton users' scripts keep working: rewritten to ours before
// commander parses (pure). `--no-mpi` means one in-process rank; `--force` (kill stray tritonservers) has nothing
// to do here: our ranks never outlive the launcher.
const RENAMES: Record<string, string> = {
  '--world_size': '--world-size',
  '--grpc_port': '--grpc-port',
  '--http_port': '--http-port',
  '--metrics_port': '--metrics-port',
  '--no-mpi': '--launcher=none',
  '--model_repo': '--model-repo',   // a Triton TensorRT-LLM repository is read (config/triton-repo.ts)
};
const DROPPED = new Set(['--force', '--log']);
const DROPPED_WITH_VALUE = new Set(['--tritonserver', '--backend', '--log-file']);

const HINTS: Record<string, string> = {
  '--log-file': 'use --log-dir <dir> (one file per rank)',
};

export function normalizeTritonSpellings(argv: string[]): { argv: string[]; notes: string[] } {
  const out: string[] = [];
  const notes: string[] = [];
  for (let i = 0; i < argv.length; i += 1) {
    const [flag, inline] = argv[i]!.split(/=(.*)/s, 2) as [string, string | undefined];
    if (DROPPED.has(flag)) {
      notes.push(`${flag} (launch_triton_server.py) is accepted and has no effect here`);
      continue;
    }
    if (DROPPED_WITH_VALUE.has(flag)) {
      notes.push(`${flag} (launch_triton_server.py) is accepted and not used: ${HINTS[flag] ?? 'not served yet'}`);
      if (inline === undefined) i += 1;
      continue;
    }
    const renamed = RENAMES[flag];
    if (renamed) out.push(inline === undefined ? renamed : `${renamed}=${inline}`);
    else out.push(argv[i]!);
  }
  return { argv: out, notes };
}
