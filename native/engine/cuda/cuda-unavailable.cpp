// The CUDA backend's entry points in a build without it (see cuda-backend.h).
#include "cuda/cuda-backend.h"
#include "errors.h"

#ifndef ENGINE_CUDA_SKIP_REASON
#define ENGINE_CUDA_SKIP_REASON "this build has no CUDA backend"
#endif

namespace engine {

bool cuda_backend_built() { return false; }
const char* cuda_backend_status() { return ENGINE_CUDA_SKIP_REASON; }
int32_t cuda_device_count() { return 0; }

std::unique_ptr<Model> make_cuda_model(const ModelConfig&, const DecoderSpec&, DecoderWeights, const ParallelLayout&,
                                       const LoadOptions&, const KvScales*) {
  throw EngineError(ErrorCode::unsupported, std::string("device cuda: ") + ENGINE_CUDA_SKIP_REASON);
}

std::unique_ptr<Model> make_cuda_dummy_model(const ModelConfig&, const DecoderSpec&, const DummyPlan&, uint64_t,
                                             const ParallelLayout&, const LoadOptions&, const KvScales*) {
  throw EngineError(ErrorCode::unsupported, std::string("device cuda: ") + ENGINE_CUDA_SKIP_REASON);
}

}  // namespace engine
