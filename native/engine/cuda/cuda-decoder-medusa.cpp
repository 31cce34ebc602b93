// Medusa heads on the GPU (model.h's set_medusa_heads / head_guesses), and which chunks may be token trees. The
// heads read the final norm's rows the last forward left in xn_ (the logit rows, in the model dtype): the rows the
// executor asks for are gathered, each head runs its residual blocks (a product, then x + SiLU(. + b)) and its
// vocabulary projection through the same GEMM paths as the model, and a top-k kernel leaves each head's
// kMedusaTopK best ids — only those cross to the host. The tree check that follows is an ordinary forward whose
// chunk carries tree_parents (batch-meta.cpp puts each token at its depth and gives the attention its ancestors).
#include <algorithm>
#include <cstring>
#include <string>

#include "cuda/cuda-decoder.h"
#include "cuda/medusa-kernels.h"
#include "model/model-checks.h"

namespace engine::cuda {

namespace {
// The heads' logits scratch: rows of one pass (every head's vocabulary row for each) fit in this many bytes.
constexpr int64_t kMedusaLogitsBytes = int64_t{64} << 20;
static_assert(kMedusaTopK <= kMedusaMaxTopK, "the GPU top-k keeps at most kMedusaMaxTopK ids a row");
}  // namespace

bool CudaDecoder::supports_token_trees() const { return token_trees_fit(config_); }

void CudaDecoder::set_medusa_heads(std::shared_ptr<const MedusaHeads> heads) {
  if (heads) check_medusa_heads(*heads, config_, layout_.last_stage(), pp_.rank(), pp_.size());
  use_device();
  medusa_.clear();
  if (!heads || heads->num_heads() == 0) return;
  const int64_t H = config_.hidden_size, V = config_.vocab_size, K = heads->num_heads();
  // Weights in the model dtype (the host copies are the loader's, shared: they stay).
  for (const MedusaHead& h : heads->heads) {
    DMedusaHead d;
    for (const MedusaHead::Block& b : h.blocks) {
      DLinear l;
      l.out = l.in = H;
      upload_matrix(b.w, l.w, false);
      upload_matrix(b.b, l.b, true);
      d.blocks.push_back(std::move(l));
    }
    d.out.out = V;
    d.out.in = H;
    upload_matrix(h.out, d.out.w, false);
    medusa_.push_back(std::move(d));
  }
  // Scratch for one pass, allocated now so that the KV pool is sized after it.
  medusa_cap_rows_ = std::clamp<int64_t>(kMedusaLogitsBytes / (K * V * 4), 1, std::max<int32_t>(max_batch_size_, 1));
  const int64_t rows = medusa_cap_rows_, es = static_cast<int64_t>(dtype_size(dt_));
  medusa_rows_.reset(static_cast<size_t>(rows) * 4);
  medusa_rows_host_.reset(static_cast<size_t>(rows) * 4);
  medusa_x0_.reset(static_cast<size_t>(rows * H * es));
  medusa_x_.reset(static_cast<size_t>(rows * H * es));
  medusa_t_.reset(static_cast<size_t>(rows * H) * 4);
  medusa_logits_.reset(static_cast<size_t>(rows * K * V) * 4);
  medusa_ids_.reset(static_cast<size_t>(rows * K * kMedusaTopK) * 4);
  medusa_ids_host_.reset(static_cast<size_t>(rows * K * kMedusaTopK) * 4);
}

void CudaDecoder::head_guesses(const std::vector<int32_t>& rows, std::vector<int32_t>& out) {
  if (medusa_.empty()) throw EngineError(ErrorCode::internal, "head_guesses without Medusa heads");
  use_device();
  const int64_t H = config_.hidden_size, V = config_.vocab_size, K = static_cast<int64_t>(medusa_.size());
  const int64_t n = static_cast<int64_t>(rows.size()), R = batch_.num_out_rows();
  for (int32_t r : rows)
    if (r < 0 || r >= R)
      throw EngineError(ErrorCode::internal, "head_guesses: row " + std::to_string(r) +
                                                 " is not a logits row of the last forward (" + std::to_string(R) + ")");
  out.resize(static_cast<size_t>(n * K * kMedusaTopK));
  const size_t es = dtype_size(dt_);
  for (int64_t r0 = 0; r0 < n; r0 += medusa_cap_rows_) {
    const int64_t m = std::min(medusa_cap_rows_, n - r0);
    std::memcpy(medusa_rows_host_.get(), rows.data() + r0, static_cast<size_t>(m) * 4);
    check_cuda(cudaMemcpyAsync(medusa_rows_.get(), medusa_rows_host_.get(), static_cast<size_t>(m) * 4,
                               cudaMemcpyHostToDevice, stream_),
               "Medusa rows");
    gather_rows_dt(xn_.get(), dt_, medusa_rows_.as<int32_t>(), medusa_x0_.get(), m, H, stream_);
    for (int64_t k = 0; k < K; ++k) {
      const DMedusaHead& head = medusa_[static_cast<size_t>(k)];
      check_cuda(cudaMemcpyAsync(medusa_x_.get(), medusa_x0_.get(), static_cast<size_t>(m * H) * es,
                                 cudaMemcpyDeviceToDevice, stream_),
                 "Medusa rows");
      for (const DLinear& b : head.blocks) {
        gemm_->xwt(m, H, H, medusa_x_.get(), b.w.get(), dt_, medusa_t_.get(), true, H, false);
        medusa_residual(medusa_x_.get(), dt_, medusa_t_.as<float>(), b.bias(), m, H, stream_);
      }
      // Row i's head k at logits [(i * K + k) * V]: the top-k's row order is the output's.
      gemm_->xwt(m, V, H, medusa_x_.get(), head.out.w.get(), dt_, medusa_logits_.as<float>() + k * V, true, K * V,
                 false);
    }
    medusa_top_k(medusa_logits_.as<float>(), m * K, V, V, kMedusaTopK, medusa_ids_.as<int32_t>(), stream_);
    const size_t bytes = static_cast<size_t>(m * K * kMedusaTopK) * 4;
    check_cuda(cudaMemcpyAsync(medusa_ids_host_.get(), medusa_ids_.get(), bytes, cudaMemcpyDeviceToHost, stream_),
               "Medusa guesses");
    check_cuda(cudaStreamSynchronize(stream_), "Medusa heads");
    std::memcpy(out.data() + r0 * K * kMedusaTopK, medusa_ids_host_.get(), bytes);
  }
}

}  // namespace engine::cuda
