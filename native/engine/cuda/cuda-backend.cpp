// The CUDA backend's entry points (cuda-backend.h) in a build that has it.
#include "cuda/cuda-backend.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

#include "comm/comm-nccl.h"
#include "cuda/cuda-decoder.h"

namespace engine {

bool cuda_backend_built() { return true; }

const char* cuda_backend_status() {
  static const std::string s = [] {
    int rt = 0;
    cudaRuntimeGetVersion(&rt);
    std::string v = "CUDA backend built for sm_90 with CUDA runtime " + std::to_string(rt / 1000) + "." +
                    std::to_string(rt % 1000 / 10) + ", cuBLAS " + std::to_string(CUBLAS_VER_MAJOR) + "." +
                    std::to_string(CUBLAS_VER_MINOR);
#ifdef ENGINE_HAVE_NCCL
    v += std::string(", NCCL ") + nccl_version();
#else
    v += ", without NCCL (tp/pp > 1 unavailable)";
#endif
    return v;
  }();
  return s.c_str();
}

int32_t cuda_device_count() {
  int n = 0;
  // No driver, or no device: the backend is simply unusable here, which auto device selection must not treat
  // as an error.
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

std::unique_ptr<Model> make_cuda_model(const ModelConfig& config, const DecoderSpec& spec, DecoderWeights weights,
                                       const ParallelLayout& layout, const LoadOptions& options,
                                       const KvScales* fp8_kv) {
  auto m = std::make_unique<cuda::CudaDecoder>(config, spec, layout, options);
  if (fp8_kv != nullptr) m->use_fp8_kv(fp8_kv->k, fp8_kv->v, fp8_kv->from);
  m->upload(std::move(weights));
  return m;
}

std::unique_ptr<Model> make_cuda_dummy_model(const ModelConfig& config, const DecoderSpec& spec, const DummyPlan& plan,
                                             uint64_t seed, const ParallelLayout& layout, const LoadOptions& options,
                                             const KvScales* fp8_kv) {
  auto m = std::make_unique<cuda::CudaDecoder>(config, spec, layout, options);
  if (fp8_kv != nullptr) m->use_fp8_kv(fp8_kv->k, fp8_kv->v, fp8_kv->from);
  m->generate(plan, seed);
  return m;
}

}  // namespace engine
