// The CUDA backend's door for the rest of the engine: plain C++ (no CUDA header), so load-model.cpp and the addon
// compile the same with or without the backend. Without it (no nvcc / cuBLAS at configure time) the functions
// below come from cuda-unavailable.cpp: the backend reports itself as not built and the factories throw
// EngineError(unsupported) with the reason.
#pragma once
#include <cstdint>
#include <memory>

#include "loading/kv-scales.h"
#include "model/decoder.h"
#include "model/dummy-weights.h"
#include "model/model.h"
#include "parallel/parallel-layout.h"

namespace engine {

bool cuda_backend_built();
// "built for sm_90 with CUDA 13.0, cuBLAS 13.1, NCCL 2.27" or why it was not built.
const char* cuda_backend_status();
// Visible GPUs; 0 when the backend is not built or no driver / GPU is found (never throws).
int32_t cuda_device_count();

// The decoder on this rank's GPU: `weights` (fp32, host) are converted to options.dtype and uploaded layer by
// layer. Tensor parallel all-reduces and pipeline sends go through NCCL communicators made from options.tp_comm /
// options.pp_comm on the first allocate_kv (a collective every rank reaches in the same order). fp8_kv set: K/V
// stored as e4m3 with those per-layer scales (--kv-cache-dtype fp8).
std::unique_ptr<Model> make_cuda_model(const ModelConfig& config, const DecoderSpec& spec, DecoderWeights weights,
                                       const ParallelLayout& layout, const LoadOptions& options,
                                       const KvScales* fp8_kv = nullptr);
// Same model with the plan's random weights generated on the GPU (load_format "dummy").
std::unique_ptr<Model> make_cuda_dummy_model(const ModelConfig& config, const DecoderSpec& spec, const DummyPlan& plan,
                                             uint64_t seed, const ParallelLayout& layout, const LoadOptions& options,
                                             const KvScales* fp8_kv = nullptr);

}  // namespace engine
