// World size, tp and pp from whichever of the three the user gave: world = tp × pp, and a disagreement names
// every number; within tp, the experts' split (ep, moe_tp) of a mixture-of-experts model: tp = moe_tp × ep as
// TensorRT-LLM defines it, moe_tp = tp and ep = 1 when neither is given (pure).
import { InvalidArgumentError } from 'commander';

export interface ParallelPlan {
  worldSize: number;
  tp: number;
  pp: number;
}

export interface ExpertPlan {
  ep: number;
  moeTp: number;
}

interface ParallelInput {
  worldSize?: number | undefined;
  tp?: number | undefined;
  pp?: number | undefined;
  ep?: number | undefined;
  moeTp?: number | undefined;
}

/** How the tp ranks split a mixture-of-experts model's experts (ParallelPlan's tp). */
export function resolveExperts(tp: number, { ep, moeTp }: ParallelInput): ExpertPlan {
  if (ep !== undefined && moeTp !== undefined) {
    if (ep * moeTp !== tp) throw new InvalidArgumentError(`--moe-tp ${moeTp} x --ep ${ep} = ${moeTp * ep} does not equal --tp ${tp} (tp = moe_tp x ep)`);
    return { ep, moeTp };
  }
  if (ep !== undefined) {
    if (tp % ep !== 0) throw new InvalidArgumentError(`--ep ${ep} does not divide --tp ${tp} (tp = moe_tp x ep: the experts are split within the tp ranks)`);
    return { ep, moeTp: tp / ep };
  }
  if (moeTp !== undefined) {
    if (tp % moeTp !== 0) throw new InvalidArgumentError(`--moe-tp ${moeTp} does not divide --tp ${tp} (tp = moe_tp x ep)`);
    return { ep: tp / moeTp, moeTp };
  }
  return { ep: 1, moeTp: tp };
}

export function resolveParallel(input: ParallelInput): ParallelPlan {
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
