#include <thread>

#include "checkpoint.h"
#include "cpu/gemm.h"
#include "errors.h"
#include "gpt2.h"
#include "llama.h"
#include "model.h"
#include "weight-reader.h"

namespace engine {

std::unique_ptr<Model> load_model(const std::string& checkpoint_dir, const LoadOptions& options) {
  const ShardInfo& s = options.shard;
  if (s.tp_size != 1 || s.pp_size != 1)
    throw EngineError(ErrorCode::unsupported, "tensor/pipeline parallel (tp_size " + std::to_string(s.tp_size) +
                                                  ", pp_size " + std::to_string(s.pp_size) +
                                                  ") lands with leader mode; use tp_size 1 and pp_size 1");
  if (options.num_threads < 0)
    throw EngineError(ErrorCode::invalid_argument,
                      "num_threads must be >= 0 (0: all cores), got " + std::to_string(options.num_threads));
  ModelConfig config = load_model_config(checkpoint_dir);
  // Conversion loops and transposes at load time use the same thread setting as inference.
  cpu::set_num_threads(options.num_threads);
  Checkpoint checkpoint(checkpoint_dir);
  WeightReader reader(checkpoint, options);
  switch (config.architecture) {
    case Architecture::llama: return load_llama(config, reader, options.num_threads);
    case Architecture::gpt2: return load_gpt2(config, reader, options.num_threads);
  }
  throw EngineError(ErrorCode::internal, "unhandled architecture " + config.architecture_name);
}

}  // namespace engine
