#include <thread>

#include "cpu/gemm.h"
#include "cuda/cuda-backend.h"
#include "errors.h"
#include "loading/checkpoint.h"
#include "loading/kv-scales.h"
#include "loading/weight-reader.h"
#include "model/decoder.h"
#include "model/dummy-weights.h"
#include "model/gpt2.h"
#include "model/llama.h"
#include "model/model.h"
#include "parallel/parallel-layout.h"

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

DecoderSpec spec_of(const ModelConfig& config) {
  switch (config.architecture) {
    case Architecture::llama: return llama_spec(config);
    case Architecture::gpt2: return gpt2_spec(config);
  }
  throw EngineError(ErrorCode::internal, "unhandled architecture " + config.architecture_name);
}

DecoderWeights read_weights(const ModelConfig& config, WeightReader& reader, const ParallelLayout& layout) {
  switch (config.architecture) {
    case Architecture::llama: return read_llama_weights(config, reader, layout);
    case Architecture::gpt2: return read_gpt2_weights(config, reader, layout);
  }
  throw EngineError(ErrorCode::internal, "unhandled architecture " + config.architecture_name);
}

// --quantization fp8 of a 16-bit checkpoint (or dummy weights): every projection without FP8 weights gets them,
// per output channel, and keeps exactly their dequantized values (what the CPU backend runs).
void quantize_projection(Linear& p) {
  if (!p.fp8.empty() || p.w.empty()) return;
  p.fp8 = quantize_per_channel(p.w.data(), p.out, p.in);
  p.w = dequantize(p.fp8);
}

// (The MoE router and shared-expert gate stay in full precision, as the FP8 MoE checkpoints keep them.)
void quantize_projections(DecoderWeights& w) {
  for (DecoderLayerWeights& l : w.layers) {
    for (Linear* p : {&l.qkv, &l.o, &l.up, &l.down, &l.moe.shared.up, &l.moe.shared.down}) quantize_projection(*p);
    for (ExpertWeights& e : l.moe.experts) {
      quantize_projection(e.up);
      quantize_projection(e.down);
    }
  }
}

constexpr uint64_t kDummySeed = 0x5EED;
}  // namespace

Device resolve_device(Device requested) {
  if (requested == Device::cpu) return Device::cpu;
  const int32_t gpus = cuda_device_count();
  if (requested == Device::cuda) {
    if (!cuda_backend_built())
      throw EngineError(ErrorCode::unsupported, std::string("device cuda: ") + cuda_backend_status() +
                                                    "; use device cpu (or auto)");
    if (gpus == 0)
      throw EngineError(ErrorCode::unsupported, std::string("device cuda: no GPU is visible (") +
                                                    cuda_backend_status() + "); use device cpu (or auto)");
    return Device::cuda;
  }
  return gpus > 0 ? Device::cuda : Device::cpu;
}

std::unique_ptr<Model> load_model(const std::string& checkpoint_dir, const LoadOptions& options) {
  const ShardInfo& s = options.shard;
  if (options.num_threads < 0)
    throw EngineError(ErrorCode::invalid_argument,
                      "num_threads must be >= 0 (0: all cores), got " + std::to_string(options.num_threads));
  if (options.load_format != "auto" && options.load_format != "dummy")
    throw EngineError(ErrorCode::invalid_argument,
                      "load_format must be auto or dummy, got '" + options.load_format + "'");
  if (!options.quantization.empty() && options.quantization != "fp8")
    throw EngineError(ErrorCode::invalid_argument,
                      "quantization must be fp8 or empty (none), got '" + options.quantization + "'");
  ModelConfig config = load_model_config(checkpoint_dir);
  const bool quantize = options.quantization == "fp8";
  // Pure and identical on every rank: a grid that cannot split this model fails everywhere with the same message.
  const ParallelLayout layout = make_parallel_layout(config, s);
  check_group("tp_comm", options.tp_comm, "tp_size", s.tp_size, "tp_rank", s.tp_rank);
  check_group("pp_comm", options.pp_comm, "pp_size", s.pp_size, "pp_rank", s.pp_rank);
  const Device device = resolve_device(options.device);
  const DecoderSpec spec = spec_of(config);
  const bool dummy = options.load_format == "dummy";
  const bool fp8_kv = wants_fp8_kv(options.kv_cache_dtype, config.quant.kv_cache_fp8);
  // (kernels-moe.cu keeps a token's router logits in a warp's registers: 16 a lane.)
  if (config.moe.enabled() && device == Device::cuda && config.moe.num_experts > 512)
    throw EngineError(ErrorCode::unsupported, config.architecture_name + ": the CUDA backend routes up to 512 experts, "
                                                  "got num_experts " + std::to_string(config.moe.num_experts) +
                                                  "; use device cpu");
  if (config.moe.enabled() && device == Device::cuda &&
      (config.hidden_size % 8 != 0 || layout.local_expert_inter() % 8 != 0))
    throw EngineError(ErrorCode::unsupported, config.architecture_name + ": the CUDA backend's expert kernels need "
                                                  "hidden_size and each rank's expert columns to be multiples of 8, got " +
                                                  std::to_string(config.hidden_size) + " and " +
                                                  std::to_string(layout.local_expert_inter()) + "; use device cpu");
  if (config.moe.enabled() && device == Device::cuda && (quantize || config.quant.quantized()))
    throw EngineError(ErrorCode::unsupported, config.architecture_name +
                                                  ": FP8 experts are not on the CUDA backend yet; serve the 16-bit "
                                                  "checkpoint without --quantization fp8, or use device cpu");
  if (device == Device::cuda) {
    if (dummy) {
      const KvScales ones{{}, {}, "1 (dummy weights)"};
      return make_cuda_dummy_model(config, spec, dummy_plan(config, spec, layout), kDummySeed, layout, options,
                                   fp8_kv ? &ones : nullptr);
    }
    Checkpoint checkpoint(checkpoint_dir);
    WeightReader reader(checkpoint, options, config.quant);
    DecoderWeights weights = read_weights(config, reader, layout);
    if (quantize) quantize_projections(weights);
    const KvScales kv_scales = fp8_kv ? read_kv_scales(checkpoint, layout) : KvScales{};
    return make_cuda_model(config, spec, std::move(weights), layout, options, fp8_kv ? &kv_scales : nullptr);
  }
  // Conversion loops and transposes at load time use the same thread setting as inference.
  cpu::set_num_threads(options.num_threads);
  DecoderWeights weights;
  KvScales kv_scales{{}, {}, "1 (dummy weights)"};
  if (dummy) {
    weights = materialize_dummy(dummy_plan(config, spec, layout), kDummySeed);
  } else {
    Checkpoint checkpoint(checkpoint_dir);
    WeightReader reader(checkpoint, options, config.quant);
    weights = read_weights(config, reader, layout);
    if (fp8_kv) kv_scales = read_kv_scales(checkpoint, layout);
  }
  if (quantize) quantize_projections(weights);
  auto model = std::make_unique<DecoderModel>(config, spec, std::move(weights), options.num_threads, layout,
                                              options.tp_comm, options.pp_comm);
  if (fp8_kv) model->use_fp8_kv(std::move(kv_scales.k), std::move(kv_scales.v), std::move(kv_scales.from));
  return model;
}

}  // namespace engine
