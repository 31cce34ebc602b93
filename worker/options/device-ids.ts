// Which device a rank computes on: --gpu-device-ids by local rank ("0,1": local rank 0 on GPU 0, local rank 1 on
// GPU 1), and which backend --device picks for this build. Pure; each caller raises its own error with the message.

export type DeviceResult<T> = { ok: true; value: T } | { ok: false; message: string };

/** "0,1" → [0, 1] (leader mode; --multi-model reads its own "0,1;2,3" spelling, launcher/multi-model). */
export function parseGpuDeviceIds(text: string): DeviceResult<number[]> {
  const ids = text.split(',').map((s) => Number(s.trim()));
  if (ids.length === 0 || ids.some((n) => !Number.isInteger(n) || n < 0)) {
    return { ok: false, message: `--gpu-device-ids must be a comma-separated list of integers >= 0, got "${text}"` };
  }
  return { ok: true, value: ids };
}

/** The GPU of the rank with `localRank` on its host. */
export function gpuOfLocalRank(text: string, localRank: number): DeviceResult<number> {
  const ids = parseGpuDeviceIds(text);
  if (!ids.ok) return ids;
  if (localRank >= ids.value.length) {
    return { ok: false, message: `--gpu-device-ids ${text} names ${ids.value.length} GPU(s) but this host runs local rank ${localRank}` };
  }
  return { ok: true, value: ids.value[localRank]! };
}

export type Device = 'auto' | 'cpu' | 'cuda';

/** What the addon says about its backends (BuildInfo's fields the choice needs). */
export interface Backends {
  backends: readonly string[];
  cudaDevices: number;
}

/**
 * The backend a rank will compute on, as the engine decides it: --device cuda or cpu as given; auto means CUDA when the
 * addon has the CUDA backend and sees a GPU. Without build facts (no addon here, a login node) only the CPU backend,
 * which every build has, is certain.
 */
export function servingBackend(device: Device | undefined, build: Backends | undefined): 'cpu' | 'cuda' {
  if (device === 'cuda' || device === 'cpu') return device;
  return build !== undefined && build.backends.includes('cuda') && build.cudaDevices > 0 ? 'cuda' : 'cpu';
}
