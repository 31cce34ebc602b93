#include <thread>

#include "checkpoint.h"
#include "cpu/gemm.h"
#include "errors.h"
#include "gpt2.h"
#include "llama.h"
#include "model.h"
#include "parallel-layout.h"
#include "weight-reader.h"

namespace engine {

namespace {
void check_group(const char* field, const Comm& comm, const char* size_field, int32_t size, const char* rank_field,
                 int32_t rank) {
  if (comm.size() != size)
    throw EngineError(ErrorCode::invalid_argument, std::string("LoadOptions.") + field + " has " +
                                                       std::to_string(comm.size()) + " rank(s) but shard." +
                                                       size_field + " is " + std::to_string(size));
  if (comm.rank() != rank)
    throw EngineError(ErrorCode::invalid_argument, std::string("LoadOptions.") + field + " rank is " +
                                                       std::to_string(comm.rank()) + " but shard." + rank_field +
                                                       " is " + std::to_string(rank));
}
}  // namespace

std::unique_ptr<Model> load_model(const std::string& checkpoint_dir, const LoadOptions& options) {
  const ShardInfo& s = options.shard;
  if (options.num_threads < 0)
    throw EngineError(ErrorCode::invalid_argument,
                      "num_threads must be >= 0 (0: all cores), got " + std::to_string(options.num_threads));
  ModelConfig config = load_model_config(checkpoint_dir);
  // Pure and identical on every rank: a grid that cannot split this model fails everywhere with the same message.
  const ParallelLayout layout = make_parallel_layout(config, s);
  check_group("tp_comm", options.tp_comm, "tp_size", s.tp_size, "tp_rank", s.tp_rank);
  check_group("pp_comm", options.pp_comm, "pp_size", s.pp_size, "pp_rank", s.pp_rank);
  // Conversion loops and transposes at load time use the same thread setting as inference.
  cpu::set_num_threads(options.num_threads);
  Checkpoint checkpoint(checkpoint_dir);
  WeightReader reader(checkpoint, options);
  switch (config.architecture) {
    case Architecture::llama: return load_llama(config, reader, layout, options);
    case Architecture::gpt2: return load_gpt2(config, reader, layout, options);
  }
  throw EngineError(ErrorCode::internal, "unhandled architecture " + config.architecture_name);
}

}  // namespace engine
