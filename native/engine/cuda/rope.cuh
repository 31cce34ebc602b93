// The rotary embedding's numerics, shared by rope_kv_kernel (kernels-elementwise.cu) and the attention kernel that
// rotates a decode row's q and k itself (kernels-attention-mma.cu): both must give what the CPU backend (and
// transformers) give, so both compute it here.
#pragma once
#include <cuda_runtime.h>

namespace engine::cuda {

// (cos, sin) of position * inv_freq: the angle rounded to fp32 first, then cos / sin in double, the CPU backend's
// order.
__device__ __forceinline__ float2 rope_cos_sin(int32_t position, float inv_freq) {
  const float angle = static_cast<float>(position) * inv_freq;
  return make_float2(static_cast<float>(cos(static_cast<double>(angle))),
                     static_cast<float>(sin(static_cast<double>(angle))));
}

// One element of a rotate_half pair: x its own value, y its partner's (dims i and i + head_dim / 2). First half:
// x cos - y sin; second half: x cos + y sin.
__device__ __forceinline__ float rope_pair(float x, float y, float2 cs, bool first_half) {
  return first_half ? x * cs.x - y * cs.y : x * cs.x + y * cs.y;
}

}  // namespace engine::cuda
