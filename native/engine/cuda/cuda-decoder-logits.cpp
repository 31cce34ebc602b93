// The end of an iteration on the GPU: the LM head (vocab-parallel under tp, sent to the leader under pp), then on
// the leader each logit row goes where its chunk's SampleOn says: the argmax kernel, the device sampler, or a copy
// to the host for the executor's sampler.
#include "cuda/cuda-decoder.h"

#include <cstring>
#include <string>


namespace engine::cuda {

float* CudaDecoder::lm_head_to_leader(const void* xn, int64_t r0, int64_t n) {
  const int64_t V = config_.vocab_size, H = config_.hidden_size;
  const size_t es = dtype_size(dt_);
  float* logits = nullptr;
  if (layout_.last_stage()) {
    const int64_t Vl = layout_.local_vocab();
    const void* head = lm_head_.empty() ? embed_.get() : lm_head_.get();
    const void* x = static_cast<const char*>(xn) + static_cast<size_t>(r0 * H) * es;
    gemm_->xwt(n, Vl, H, x, head, dt_, logits_local_.get(), true, Vl, false);
    logits = logits_local_.as<float>();
    // Gemma 2's final soft cap, before the vocab padding is masked and before anything samples or copies a row.
    if (config_.final_softcap > 0) soft_cap(logits, n * Vl, config_.final_softcap, stream_);
    if (tp_.size() > 1) {
      mask_columns(logits, n, Vl, layout_.local_real_vocab(V), stream_);
      if (transfers_)
        tp_dev_->all_gather(logits, static_cast<size_t>(n * Vl), logits_all_.as<float>(), stream_);
      comm_stats_.bytes += static_cast<uint64_t>(n * Vl) * 4;
      ++comm_stats_.calls;
      assemble_vocab(logits_all_.as<float>(), tp_.size(), n, Vl, V, logits_full_.as<float>(), stream_);
      logits = logits_full_.as<float>();
    }
    if (pp_.size() > 1 && tp_.rank() == 0 && transfers_) {
      if (sends_argmaxes()) {
        int32_t* gd = greedy_dev_.as<int32_t>();
        greedy_sample(logits, iota_.as<int32_t>(), static_cast<int32_t>(n), V, gd,
                      reinterpret_cast<float*>(gd + cap_logit_rows_), stream_);
        pp_dev_->send(gd, argmax_bytes(), 0, stream_);
        comm_stats_.bytes += argmax_bytes();
      } else {
        pp_dev_->send(logits, static_cast<size_t>(n * V) * 4, 0, stream_);
        comm_stats_.bytes += static_cast<uint64_t>(n * V) * 4;
      }
      ++comm_stats_.calls;
    }
  } else if (layout_.leader()) {
    logits = logits_full_.as<float>();
    if (!transfers_) return sends_argmaxes() ? nullptr : logits;  // (a graph's warm-up: nothing comes)
    if (sends_argmaxes()) {
      pp_dev_->recv(greedy_dev_.get(), argmax_bytes(), pp_.size() - 1, stream_);
      comm_stats_.bytes += argmax_bytes();
      ++comm_stats_.calls;
      return nullptr;
    }
    pp_dev_->recv(logits, static_cast<size_t>(n * V) * 4, pp_.size() - 1, stream_);
    comm_stats_.bytes += static_cast<uint64_t>(n * V) * 4;
    ++comm_stats_.calls;
  }
  return layout_.leader() && !sends_argmaxes() ? logits : nullptr;
}

void CudaDecoder::lm_head_rows(const void* xn, int64_t r0, int64_t n, const std::vector<SequenceChunk>& chunks,
                               ForwardOutput& out) {
  float* logits = lm_head_to_leader(xn, r0, n);
  if (!layout_.leader()) return;
  take_rows(logits, r0, n, chunks, out);
}

void CudaDecoder::take_rows(float* logits, int64_t r0, int64_t n, const std::vector<SequenceChunk>& chunks,
                            ForwardOutput& out) {
  const int64_t V = config_.vocab_size;

  // Argmax rows on the GPU; the others: copied to the host, runs of consecutive host rows at once.
  // greedy buffers: [0, cap) tokens, [cap, 2 cap) log-probs, [2 cap, 3 cap) the rows' indices in this slice.
  const int64_t cap = cap_logit_rows_;
  int32_t* gd = greedy_dev_.as<int32_t>();
  int32_t* gh = greedy_host_.as<int32_t>();
  int32_t ng = 0;
  for (int64_t i = 0; i < n; ++i)
    if (chunks[static_cast<size_t>(batch_.out_chunk[r0 + i])].sample_on == SampleOn::device_argmax)
      gh[2 * cap + ng++] = static_cast<int32_t>(i);
  if (logits == nullptr && ng != n)
    throw EngineError(ErrorCode::internal, "the last stage sent argmaxes for a slice with " + std::to_string(n - ng) +
                                               " rows drawn otherwise");
  if (ng > 0) {
    if (logits != nullptr) {  // (else the last stage argmaxed every row, in order)
      check_cuda(cudaMemcpyAsync(gd + 2 * cap, gh + 2 * cap, sizeof(int32_t) * ng, cudaMemcpyHostToDevice, stream_),
                 "greedy rows");
      greedy_sample(logits, gd + 2 * cap, ng, V, gd, reinterpret_cast<float*>(gd + cap), stream_);
    }
    check_cuda(cudaMemcpyAsync(gh, gd, sizeof(int32_t) * ng, cudaMemcpyDeviceToHost, stream_), "greedy tokens");
    check_cuda(cudaMemcpyAsync(gh + cap, gd + cap, sizeof(float) * ng, cudaMemcpyDeviceToHost, stream_),
               "greedy log-probs");
  }
  run_sampling_prep();  // (first slice only) the executor's host work for the sampling, while the layers run
  enqueue_sampling(logits, r0, n, chunks, out);
  const int32_t* host_row = batch_.host_row.data();
  float* staging = logits_host_.as<float>();
  for (int64_t i = 0; i < n;) {
    if (host_row[r0 + i] < 0) {
      ++i;
      continue;
    }
    int64_t j = i + 1;
    while (j < n && host_row[r0 + j] == host_row[r0 + j - 1] + 1) ++j;
    check_cuda(cudaMemcpyAsync(staging + i * V, logits + i * V, sizeof(float) * (j - i) * V, cudaMemcpyDeviceToHost,
                               stream_),
               "copy logits");
    i = j;
  }
  wait_stream();
  for (int64_t i = 0; i < n; ++i)
    if (host_row[r0 + i] >= 0)
      std::memcpy(out.logits.data() + static_cast<size_t>(host_row[r0 + i]) * V, staging + i * V, sizeof(float) * V);
  sampler_.finish(out);
  const float* glp = reinterpret_cast<const float*>(gh + cap);
  for (int32_t g = 0; g < ng; ++g) {
    const int64_t row = r0 + gh[2 * cap + g];
    const auto c = static_cast<size_t>(batch_.out_chunk[row]);
    out.sampled[c] = DeviceSample{gh[g], glp[g]};  // (an all_logits chunk's last row comes last)
    if (out.first_sample[c] >= 0)
      out.row_samples[static_cast<size_t>(out.first_sample[c] + (batch_.out_rows[row] - batch_.chunk_first_row[c]))] =
          DeviceSample{gh[g], glp[g]};
  }
}

void CudaDecoder::enqueue_sampling(float* logits, int64_t r0, int64_t n, const std::vector<SequenceChunk>& chunks,
                                   const ForwardOutput& out) {
  for (int64_t i = 0; i < n; ++i) {
    const int32_t c = batch_.out_chunk[r0 + i];
    const SequenceChunk& ch = chunks[static_cast<size_t>(c)];
    if (ch.sample_on != SampleOn::device) continue;
    if (!ch.all_logits) {
      sampler_.add(static_cast<int32_t>(i), c, ch.device_sampling);
      continue;
    }
    // A speculative step's check of a sampled request: row j is the draw of step + j (no penalty or guide there:
    // batch-layout.h), into its row_samples entry.
    const int64_t j = batch_.out_rows[r0 + i] - batch_.chunk_first_row[static_cast<size_t>(c)];
    DeviceSampling d = ch.device_sampling;
    d.step += static_cast<uint64_t>(j);
    sampler_.add(static_cast<int32_t>(i), c, d, out.first_sample[static_cast<size_t>(c)] + static_cast<int32_t>(j));
  }
  sampler_.enqueue(logits, config_.vocab_size, stream_);
}

bool CudaDecoder::sampled_row(int32_t chunk, std::vector<float>& row) {
  use_device();
  return sampler_.copy_row(chunk, config_.vocab_size, row, stream_);
}

void CudaDecoder::enqueue_logits_and_greedy(int64_t rows) {
  float* logits = lm_head_to_leader(xn_.get(), 0, rows);
  // (A rank that is not the leader ends its part with its transfers; a leader sent the argmaxes has them already.)
  if (logits == nullptr) return;
  int32_t* gd = greedy_dev_.as<int32_t>();
  greedy_sample(logits, iota_.as<int32_t>(), static_cast<int32_t>(rows), config_.vocab_size, gd,
                reinterpret_cast<float*>(gd + cap_logit_rows_), stream_);
}

}  // namespace engine::cuda
