#include "cuda/device-sampler.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "cuda/cuda-check.h"

namespace engine::cuda {
namespace {
size_t align8(size_t n) { return (n + 7) / 8 * 8; }
}  // namespace

DeviceSampler::~DeviceSampler() {
  if (uploaded_ != nullptr) cudaEventDestroy(uploaded_);
  if (upload_ != nullptr) cudaStreamDestroy(upload_);
}

void DeviceSampler::add(int32_t row, int32_t chunk, const DeviceSampling& d, int32_t row_sample) {
  SampleSpec s{};
  s.row = row;
  s.greedy = d.greedy ? 1 : 0;
  s.top_k = d.top_k;
  s.temperature = d.temperature;
  s.top_p = d.top_p;
  s.repetition = d.repetition_penalty;
  s.presence = d.presence_penalty;
  s.frequency = d.frequency_penalty;
  s.pen_begin = static_cast<int32_t>(pen_tokens_.size());
  s.pen_count = static_cast<int32_t>(d.penalty_tokens.size());
  s.mask = -1;
  // Never drawn unconstrained by mistake: a guided row's mask comes from the executor's sampling prep.
  if (d.guided && d.allowed.empty()) throw std::logic_error("device sampling: a guided row arrived without its token mask");
  if (!d.allowed.empty()) {
    if (mask_words_ == 0) mask_words_ = d.allowed.size();
    if (d.allowed.size() != mask_words_)
      throw std::invalid_argument("device sampling: a guided row's token mask has " + std::to_string(d.allowed.size()) +
                                  " words, another's " + std::to_string(mask_words_));
    s.mask = static_cast<int32_t>(masks_.size());
    masks_.push_back(d.allowed.data());  // copied once, straight into the upload buffer, by enqueue()
  }
  s.seed = d.seed;
  s.step = d.step;
  for (const auto& [token, count] : d.penalty_tokens) {
    pen_tokens_.push_back(token);
    pen_counts_.push_back(count);
  }
  specs_.push_back(s);
  chunks_.push_back(chunk);
  row_samples_.push_back(row_sample);
}

void DeviceSampler::enqueue(float* logits, int64_t vocab, cudaStream_t s) {
  if (specs_.empty()) return;
  const size_t n = specs_.size(), p = pen_tokens_.size();
  const size_t spec_bytes = n * sizeof(SampleSpec), pen_bytes = p * sizeof(int32_t);
  const size_t tokens_at = spec_bytes, counts_at = tokens_at + pen_bytes;
  const size_t masks_at = align8(counts_at + pen_bytes), mask_bytes = masks_.size() * mask_words_ * sizeof(uint64_t);
  results_at_ = align8(masks_at + mask_bytes);
  const size_t total = results_at_ + n * (sizeof(int32_t) + sizeof(float));
  host_.ensure(total);
  dev_.ensure(total);
  char* h = host_.as<char>();
  std::memcpy(h, specs_.data(), spec_bytes);
  if (p > 0) {
    std::memcpy(h + tokens_at, pen_tokens_.data(), pen_bytes);
    std::memcpy(h + counts_at, pen_counts_.data(), pen_bytes);
  }
  for (size_t k = 0; k < masks_.size(); ++k)
    std::memcpy(h + masks_at + k * mask_words_ * sizeof(uint64_t), masks_[k], mask_words_ * sizeof(uint64_t));
  kept_logits_ = logits;
  kept_rows_.clear();
  for (size_t i = 0; i < n; ++i) kept_rows_.emplace_back(chunks_[i], specs_[i].row);
  char* d = dev_.as<char>();
  if (upload_ == nullptr) {
    check_cuda(cudaStreamCreateWithFlags(&upload_, cudaStreamNonBlocking), "sampling upload stream");
    check_cuda(cudaEventCreateWithFlags(&uploaded_, cudaEventDisableTiming), "sampling upload event");
  }
  check_cuda(cudaMemcpyAsync(d, h, results_at_, cudaMemcpyHostToDevice, upload_), "upload sampling parameters");
  check_cuda(cudaEventRecord(uploaded_, upload_), "upload sampling parameters");
  check_cuda(cudaStreamWaitEvent(s, uploaded_, 0), "upload sampling parameters");
  auto* tok = reinterpret_cast<int32_t*>(d + results_at_);
  sample_rows(logits, vocab, reinterpret_cast<const SampleSpec*>(d), static_cast<int32_t>(n),
              reinterpret_cast<const int32_t*>(d + tokens_at), reinterpret_cast<const int32_t*>(d + counts_at),
              reinterpret_cast<const uint64_t*>(d + masks_at), static_cast<int64_t>(mask_words_), tok,
              reinterpret_cast<float*>(tok + n), s);
  check_cuda(cudaMemcpyAsync(h + results_at_, d + results_at_, n * (sizeof(int32_t) + sizeof(float)),
                             cudaMemcpyDeviceToHost, s),
             "download sampled tokens");
}

void DeviceSampler::finish(ForwardOutput& out) {
  if (specs_.empty()) return;
  const size_t n = specs_.size();
  const auto* tok = reinterpret_cast<const int32_t*>(host_.as<char>() + results_at_);
  const auto* lp = reinterpret_cast<const float*>(tok + n);
  for (size_t i = 0; i < n; ++i) {
    // (An all_logits chunk's rows come in order: its `sampled` entry ends as its last row's.)
    out.sampled[static_cast<size_t>(chunks_[i])] = DeviceSample{tok[i], lp[i]};
    if (row_samples_[i] >= 0) out.row_samples[static_cast<size_t>(row_samples_[i])] = DeviceSample{tok[i], lp[i]};
  }
  reset_rows();
}

bool DeviceSampler::copy_row(int32_t chunk, int64_t vocab, std::vector<float>& row, cudaStream_t s) const {
  for (const auto& [c, r] : kept_rows_) {
    if (c != chunk || kept_logits_ == nullptr) continue;
    row.resize(static_cast<size_t>(vocab));
    row_host_.ensure(sizeof(float) * static_cast<size_t>(vocab));
    check_cuda(cudaMemcpyAsync(row_host_.get(), kept_logits_ + static_cast<int64_t>(r) * vocab, sizeof(float) * vocab,
                               cudaMemcpyDeviceToHost, s),
               "copy a sampled row");
    check_cuda(cudaStreamSynchronize(s), "copy a sampled row");
    std::memcpy(row.data(), row_host_.get(), sizeof(float) * static_cast<size_t>(vocab));
    return true;
  }
  return false;
}

void DeviceSampler::clear() {
  kept_logits_ = nullptr;
  kept_rows_.clear();
  reset_rows();
}

void DeviceSampler::reset_rows() {
  specs_.clear();
  chunks_.clear();
  row_samples_.clear();
  pen_tokens_.clear();
  pen_counts_.clear();
  masks_.clear();
  mask_words_ = 0;
}

}  // namespace engine::cuda
