// Samples rows of a device logits buffer, for chunks whose SampleOn is device, with their DeviceSampling
// (kernels.h's sample_rows): the parameters and penalty tokens go to the GPU in one copy, the tokens come back in one.
#pragma once
#include <cuda_runtime.h>

#include <vector>

#include "cuda/device-buffer.h"
#include "cuda/kernels.h"
#include "model/model.h"

namespace engine::cuda {

class DeviceSampler {
 public:
  // One row to sample: row `row` of the buffer enqueue() gets, whose token goes to out.sampled[chunk].
  void add(int32_t row, int32_t chunk, const DeviceSampling& d);
  bool empty() const { return specs_.empty(); }
  // Uploads, samples and downloads on `s`, asynchronously (rewrites the sampled rows of `logits`).
  void enqueue(float* logits, int64_t vocab, cudaStream_t s);
  // After `s` synchronised: each row's token and log-probability into out.sampled; then ready for the next batch.
  void finish(ForwardOutput& out);
  // Forgets rows added but not finished (a forward pass that failed half way).
  void clear();

 private:
  std::vector<SampleSpec> specs_;
  std::vector<int32_t> chunks_, pen_tokens_, pen_counts_;
  DeviceBuffer dev_;
  PinnedBuffer host_;
  size_t results_at_ = 0;  // byte offset of the tokens, then the log-probs, in both buffers
};

}  // namespace engine::cuda
