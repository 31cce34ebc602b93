// Programmatic dependent launch (Hopper): a kernel launched with launch_pdl() may be scheduled while the kernel
// before it on the stream is still finishing. Each such kernel calls pdl_wait() before it touches memory that
// earlier kernels write or read (the wait returns once the previous kernel completed and its writes are visible,
// and that kernel itself waited for its own predecessor), then pdl_trigger() so that the next kernel can be
// scheduled in turn. Only reads of data no kernel writes (weights) may come before the wait: the decode GEMV
// prefetches its first weight rows there, which hides the gap between the small per-layer kernels of a decode step.
// TRTLLM_CUDA_PDL=0 launches everything the ordinary way (the waits are then no-ops).
#pragma once
#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "cuda/cuda-check.h"

namespace engine::cuda {

__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// The entry of a kernel that reads what earlier kernels wrote: wait, then let the next kernel be scheduled.
// (Triggering before the wait is also correct — the next kernel's wait still returns only after this one
// completed — but it let waiting blocks of later kernels hold the SMs: a batch-1 decode step took 4.96 ms instead
// of 4.48 on an H200.)
__device__ __forceinline__ void pdl_enter() {
  pdl_wait();
  pdl_trigger();
}

// 1 on, 0 off, -1 not decided yet (then: on for compute capability 9+ unless TRTLLM_CUDA_PDL=0). kernels.h's
// set_pdl() changes it (the benchmark's with / without comparison).
inline std::atomic<int>& pdl_state() {
  static std::atomic<int> state{-1};
  return state;
}
inline bool pdl_enabled() {
  int on = pdl_state().load(std::memory_order_relaxed);
  if (on < 0) {
    const char* v = std::getenv("TRTLLM_CUDA_PDL");
    int dev = 0, major = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    on = (v != nullptr && std::strcmp(v, "0") == 0) || major < 9 ? 0 : 1;
    pdl_state().store(on, std::memory_order_relaxed);
  }
  return on == 1;
}

// A launch with `smem` bytes of dynamic shared memory; pdl: programmatic dependent launch (see above); done
// (nullable): an event (made with cudaEventDisableTiming) that this launch records programmatically — it fires once
// every block of the kernel has called pdl_trigger or finished, so that a kernel launched with PDL on a stream that
// waits on it may start early too, its pdl_wait returning once this kernel has completed (a fork's join that does not
// cost the kernel after it its early start: cuda-decoder-lora.cpp). Without PDL, a plain launch and event record.
template <typename... KernelArgs, typename... Args>
void launch_ex(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t s, bool pdl,
               cudaEvent_t done, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = s;
  cudaLaunchAttribute attr[2];
  const bool on = pdl_enabled();
  if (on && pdl) {
    attr[cfg.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[cfg.numAttrs++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (on && done != nullptr) {
    attr[cfg.numAttrs].id = cudaLaunchAttributeProgrammaticEvent;
    attr[cfg.numAttrs].val.programmaticEvent.event = done;
    attr[cfg.numAttrs].val.programmaticEvent.flags = 0;
    attr[cfg.numAttrs++].val.programmaticEvent.triggerAtBlockStart = 0;
  }
  cfg.attrs = attr;
  check_cuda(cudaLaunchKernelEx(&cfg, kernel, static_cast<KernelArgs>(std::forward<Args>(args))...), "cudaLaunchKernelEx");
  if (!on && done != nullptr) check_cuda(cudaEventRecord(done, s), "cudaEventRecord");
}

// launch_pdl() with `smem` bytes of dynamic shared memory.
template <typename... KernelArgs, typename... Args>
void launch_pdl_smem(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t s,
                     Args&&... args) {
  launch_ex(kernel, grid, block, smem, s, true, nullptr, std::forward<Args>(args)...);
}

// launch_pdl_smem for a kernel that may want more than the default 48 KB of dynamic shared memory: opted in to
// Smem bytes on its first launch (Kernel is a template argument, so every kernel has its own opt-in).
template <auto Kernel, size_t Smem, typename... Args>
void launch_pdl_opted(dim3 grid, dim3 block, cudaStream_t s, Args&&... args) {
  if constexpr (Smem > 48 * 1024) {
    static const cudaError_t opted =
        cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(Smem));
    check_cuda(opted, "cudaFuncSetAttribute (dynamic shared memory)");
  }
  launch_pdl_smem(Kernel, grid, block, Smem, s, std::forward<Args>(args)...);
}

template <typename... KernelArgs, typename... Args>
void launch_pdl(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, cudaStream_t s, Args&&... args) {
  launch_pdl_smem(kernel, grid, block, 0, s, std::forward<Args>(args)...);
}

}  // namespace engine::cuda
