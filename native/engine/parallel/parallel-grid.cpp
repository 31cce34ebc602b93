#include "parallel/parallel-grid.h"

#include <string>

#include "errors.h"

namespace engine {

ParallelGrid make_parallel_grid(const Comm& world, int32_t tp, int32_t pp) {
  if (tp < 1 || pp < 1)
    throw EngineError(ErrorCode::invalid_argument,
                      "tp and pp must be >= 1, got tp " + std::to_string(tp) + ", pp " + std::to_string(pp));
  if (static_cast<int64_t>(tp) * pp != world.size())
    throw EngineError(ErrorCode::invalid_argument, "tp " + std::to_string(tp) + " x pp " + std::to_string(pp) +
                                                       " = " + std::to_string(static_cast<int64_t>(tp) * pp) +
                                                       " does not match the " + std::to_string(world.size()) +
                                                       " rank(s) started");
  ParallelGrid g;
  g.shard.tp_size = tp;
  g.shard.pp_size = pp;
  g.shard.tp_rank = world.rank() % tp;
  g.shard.pp_rank = world.rank() / tp;
  g.tp = world.split(g.shard.pp_rank, g.shard.tp_rank);
  g.pp = world.split(g.shard.tp_rank, g.shard.pp_rank);
  return g;
}

}  // namespace engine
