// World size, tp and pp from whichever of the three the user gave: world = tp × pp, and a disagreement names
// every number (pure).
import { InvalidArgumentError } from 'commander';

export interface ParallelPlan {
  worldSize: number;
  tp: number;
  pp: number;
}

export function resolveParallel(input: { worldSize?: number | undefined; tp?: number | undefined; pp?: number | undefined }): ParallelPlan {
  const { worldSize, tp, pp } = input;
  if (tp !== undefined && pp !== undefined) {
    if (worldSize !== undefined && worldSize !== tp * pp) {
      throw new InvalidArgumentError(`--world-size ${worldSize} does not equal --tp ${tp} x --pp ${pp} = ${tp * pp}`);
    }
    return { worldSize: tp * pp, tp, pp };
  }
  if (tp !== undefined) {
    const world = worldSize ?? tp;
    if (world % tp !== 0) throw new InvalidArgumentError(`--world-size ${world} is not a multiple of --tp ${tp}`);
    return { worldSize: world, tp, pp: world / tp };
  }
  if (pp !== undefined) {
    const world = worldSize ?? pp;
    if (world % pp !== 0) throw new InvalidArgumentError(`--world-size ${world} is not a multiple of --pp ${pp}`);
    return { worldSize: world, tp: world / pp, pp };
  }
  // Only a world size: tensor parallel over all ranks, as launch_triton_server.py's --world_size with a tp engine.
  const world = worldSize ?? 1;
  return { worldSize: world, tp: world, pp: 1 };
}
