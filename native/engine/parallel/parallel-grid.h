// This rank's place in the tp x pp grid and its two groups, split from the world communicator. World rank =
// pp_rank * tp + tp_rank (model.h's ShardInfo), so the tp ranks of a stage are neighbours and world rank 0 (stage
// 0, tp rank 0) leads. The one definition the addon, the tests and the benchmarks use.
#pragma once
#include <cstdint>

#include "comm/comm.h"
#include "model/model.h"

namespace engine {

struct ParallelGrid {
  ShardInfo shard;
  Comm tp;  // the tp ranks of this rank's stage, ordered by tp rank
  Comm pp;  // this rank's tp rank in every stage, ordered by pp rank
};

// Collective over `world` (two splits). Throws EngineError(invalid_argument) when tp or pp is below 1 or tp x pp
// is not world's size; every rank of `world` throws alike, before any collective.
ParallelGrid make_parallel_grid(const Comm& world, int32_t tp, int32_t pp);

}  // namespace engine
