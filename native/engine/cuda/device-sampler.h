// Samples rows of a device logits buffer, for chunks whose SampleOn is device, with their DeviceSampling
// (kernels.h's sample_rows): the parameters, penalty tokens and guided rows' token masks go to the GPU in one copy,
// the tokens come back in one. The upload runs on a stream of its own, so that it overlaps the work already queued
// before the sampling (a decode step's graph): guided rows' masks are 16 KB each at 128k tokens.
#pragma once
#include <cuda_runtime.h>

#include <utility>
#include <vector>

#include "cuda/device-buffer.h"
#include "cuda/kernels.h"
#include "model/model.h"

namespace engine::cuda {

class DeviceSampler {
 public:
  DeviceSampler() = default;
  ~DeviceSampler();
  DeviceSampler(const DeviceSampler&) = delete;
  DeviceSampler& operator=(const DeviceSampler&) = delete;
  // One row to sample: row `row` of the buffer enqueue() gets, whose token goes to out.sampled[chunk], or with
  // row_sample >= 0 to out.row_samples[row_sample] (a row of an all_logits chunk). `d` (its mask) is read again by
  // enqueue().
  void add(int32_t row, int32_t chunk, const DeviceSampling& d, int32_t row_sample = -1);
  bool empty() const { return specs_.empty(); }
  // Uploads (on its own stream, joined into `s` before the kernel), samples and downloads on `s`, asynchronously
  // (rewrites the sampled rows of `logits`). The previous enqueue's work must have finished (the caller
  // synchronises `s` after each), as its buffers are rewritten at once.
  void enqueue(float* logits, int64_t vocab, cudaStream_t s);
  // After `s` synchronised: each row's token and log-probability into out.sampled; then ready for the next batch.
  void finish(ForwardOutput& out);
  // Forgets rows added but not finished (a forward pass that failed half way), and the last buffer's rows.
  void clear();
  // The row chunk `chunk` was last sampled from, as the kernel left it (NaN, the guide's mask and the penalties
  // applied, divided by the temperature when it sampled), copied to `row` on `s`; false when that row is not in
  // the last enqueued buffer (a later slice of the forward reused it).
  bool copy_row(int32_t chunk, int64_t vocab, std::vector<float>& row, cudaStream_t s) const;

 private:
  std::vector<SampleSpec> specs_;
  std::vector<int32_t> chunks_, row_samples_, pen_tokens_, pen_counts_;
  // The guided rows' allowed-token bitsets (mask_words_ each), in the DeviceSampling the caller passed to add(),
  // which must outlive enqueue().
  std::vector<const uint64_t*> masks_;
  size_t mask_words_ = 0;
  DeviceBuffer dev_;
  PinnedBuffer host_;
  mutable PinnedBuffer row_host_;  // copy_row's staging (a pageable copy of 512 KB is several times slower)
  cudaStream_t upload_ = nullptr;  // created on first use, on the device current then (the decoder's)
  cudaEvent_t uploaded_ = nullptr;
  size_t results_at_ = 0;  // byte offset of the tokens, then the log-probs, in both buffers
  // The last enqueued buffer and its (chunk, row) pairs, for copy_row.
  const float* kept_logits_ = nullptr;
  std::vector<std::pair<int32_t, int32_t>> kept_rows_;
  void reset_rows();
};

}  // namespace engine::cuda
