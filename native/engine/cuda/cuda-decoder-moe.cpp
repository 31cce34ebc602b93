// The mixture-of-experts MLP of CudaDecoder (cuda-decoder.h): the router over the fp32 residual stream (the same
// routing as the CPU model), the (token, slot) entries permuted into expert-contiguous rows, those rows gathered,
// the active experts' gate|up product, gated activation and down product, and the weighted combine back onto the
// residual stream, with tp ranks' partial sums added by one all-reduce as a dense MLP's. Decode-sized batches take
// the expert GEMV (only the chosen experts' weights are read), larger ones 64 x 64 tensor-core tiles; both read the
// row layout on the device, so nothing waits for the host and decode steps run as CUDA graphs.
#include <algorithm>
#include <vector>

#include "cuda/cuda-decoder.h"

namespace engine::cuda {

size_t CudaDecoder::decode_read_bytes() const {
  size_t bytes = lm_head_.empty() ? weight_bytes_ : weight_bytes_ - embed_.bytes();
  for (const DLayer& l : layers_) {
    if (!l.moe.on()) continue;
    const size_t unread = l.moe.up.size() - std::min<size_t>(l.moe.up.size(), static_cast<size_t>(config_.moe.top_k));
    bytes -= unread * (l.moe.up[0].bytes() + l.moe.down[0].bytes());
  }
  return bytes;
}

void CudaDecoder::upload_moe(MoeWeights& w, DMoe& d) {
  for (const ExpertWeights& e : w.experts)
    if (!e.up.fp8.empty() || !e.down.fp8.empty())
      throw EngineError(ErrorCode::unsupported, "FP8 experts are not on the CUDA backend yet");
  upload_matrix(w.router.w, d.router, true);
  d.up.resize(w.experts.size());
  d.down.resize(w.experts.size());
  for (size_t e = 0; e < w.experts.size(); ++e) {
    d.cols = w.experts[e].down.in;
    upload_matrix(w.experts[e].up.w, d.up[e], false);
    upload_matrix(w.experts[e].down.w, d.down[e], false);
    w.experts[e] = ExpertWeights();  // the host copy goes as soon as the device one exists
  }
  auto lin = [&](Linear& l, DLinear& dl) {
    dl.out = l.out;
    dl.in = l.in;
    upload_matrix(l.w, dl.w, false);
    l = Linear();
  };
  lin(w.shared.up, d.shared_up);
  lin(w.shared.down, d.shared_down);
  upload_matrix(w.shared_gate.w, d.shared_gate, true);
  w.shared_gate = Linear();
  finish_moe(d);
}

void CudaDecoder::generate_moe(const DummyMoe& m, uint64_t seed, DMoe& d) {
  fill_matrix(m.router, seed, d.router, true);
  d.up.resize(m.experts.size());
  d.down.resize(m.experts.size());
  for (size_t e = 0; e < m.experts.size(); ++e) {
    d.cols = m.experts[e].down.in;
    fill_matrix(m.experts[e].up, seed, d.up[e], false);
    fill_matrix(m.experts[e].down, seed, d.down[e], false);
  }
  auto lin = [&](const DummyMatrix& w, DLinear& dl) {
    dl.out = w.out;
    dl.in = w.in;
    fill_matrix(w, seed, dl.w, false);
  };
  lin(m.shared.up, d.shared_up);
  lin(m.shared.down, d.shared_down);
  fill_matrix(m.shared_gate, seed, d.shared_gate, true);
  finish_moe(d);
}

void CudaDecoder::finish_moe(DMoe& d) {
  if (d.up.empty()) return;
  std::vector<const void*> up, down;
  for (size_t e = 0; e < d.up.size(); ++e) {
    up.push_back(d.up[e].get());
    down.push_back(d.down[e].get());
  }
  d.up_ptrs.reset(up.size() * sizeof(void*));
  d.down_ptrs.reset(down.size() * sizeof(void*));
  check_cuda(cudaMemcpy(d.up_ptrs.get(), up.data(), up.size() * sizeof(void*), cudaMemcpyHostToDevice), "upload expert table");
  check_cuda(cudaMemcpy(d.down_ptrs.get(), down.data(), down.size() * sizeof(void*), cudaMemcpyHostToDevice),
             "upload expert table");
}

void CudaDecoder::reserve_moe(int64_t tokens) {
  const DMoe* any = nullptr;
  int64_t shared_cols = 0;
  for (const DLayer& l : layers_) {
    if (l.moe.on()) any = &l.moe;
    shared_cols = std::max(shared_cols, l.moe.shared_up.out / 2);
  }
  if (any == nullptr) return;
  const int64_t H = config_.hidden_size, k = config_.moe.top_k, c = any->cols, es = dtype_size(dt_);
  const int64_t entries = tokens * k, n_local = layout_.local_experts();
  moe_ids_.ensure(entries * 4);
  moe_weights_.ensure(entries * 4);
  moe_slot_.ensure(entries * 4);
  moe_row_token_.ensure(entries * 4);
  moe_offsets_.ensure((n_local + 1) * 4);
  moe_active_.ensure((n_local + 1) * 4);
  moe_tiles_.ensure((1 + 2 * moe_max_tiles(entries, static_cast<int32_t>(n_local))) * 4);
  moe_logits_.ensure(tokens * config_.moe.num_experts * 4);
  moe_xp_.ensure(entries * H * es);
  moe_h_.ensure(entries * 2 * c * es);
  moe_act_.ensure(entries * c * es);
  moe_y_.ensure(entries * H * 4);
  if (tp_.size() > 1) moe_out_.ensure(tokens * H * 4);
  if (shared_cols > 0) {
    // The shared expert runs through the dense MLP's buffers.
    mlp_.ensure(tokens * 2 * shared_cols * es);
    mlp_act_.ensure(tokens * shared_cols * es);
    moe_shared_y_.ensure(tokens * H * 4);
  }
}

void CudaDecoder::moe_experts(const DMoe& m, int64_t entries) {
  const int64_t H = config_.hidden_size, c = m.cols;
  const int32_t n_local = layout_.local_experts();
  const int32_t* offsets = moe_offsets_.as<int32_t>();
  const int32_t* row_token = moe_row_token_.as<int32_t>();
  if (moe_gemv_fits(entries)) {
    // The gather rides along in the first GEMV. (The gated activation stays a kernel of its own: in the second GEMV
    // every output row would recompute it; bench/RESULTS.md has the measurement.)
    const auto max_active = static_cast<int32_t>(std::min<int64_t>(n_local, entries));
    const int32_t* active = moe_active_.as<int32_t>();
    moe_expert_gemv(m.up_ptrs.as<const void*>(), offsets, active, n_local, max_active, xn_.get(), row_token, dt_,
                    2 * c, H, moe_h_.get(), false, stream_);
    gated_activation(moe_h_.get(), moe_act_.get(), dt_, entries, c, act_, nullptr, stream_);
    moe_expert_gemv(m.down_ptrs.as<const void*>(), offsets, active, n_local, max_active, moe_act_.get(), nullptr, dt_,
                    H, c, moe_y_.get(), true, stream_);
    return;
  }
  moe_gather(xn_.get(), dt_, row_token, offsets + n_local, entries, H, moe_xp_.get(), stream_);
  const int64_t max_tiles = moe_max_tiles(entries, n_local);
  const int32_t* tiles = moe_tiles_.as<int32_t>();
  moe_expert_mma(m.up_ptrs.as<const void*>(), tiles, offsets, max_tiles, moe_xp_.get(), dt_, 2 * c, H, moe_h_.get(),
                 false, stream_);
  // (Rows past the local total hold stale values; nothing reads their products.)
  gated_activation(moe_h_.get(), moe_act_.get(), dt_, entries, c, act_, nullptr, stream_);
  moe_expert_mma(m.down_ptrs.as<const void*>(), tiles, offsets, max_tiles, moe_act_.get(), dt_, H, c, moe_y_.get(),
                 true, stream_);
}

void CudaDecoder::moe_layer(int32_t l, float* x, int64_t rows) {
  const DLayer& lw = layers_[l];
  const DMoe& m = lw.moe;
  const MoeConfig& mc = config_.moe;
  const int64_t H = config_.hidden_size, k = mc.top_k, entries = rows * k;
  const int32_t n_local = layout_.local_experts();
  int32_t* ids = moe_ids_.as<int32_t>();
  float* weights = moe_weights_.as<float>();
  int32_t* slot = moe_slot_.as<int32_t>();
  int32_t* offsets = moe_offsets_.as<int32_t>();
  float* logits = moe_logits_.as<float>();
  if (entries <= kMoeGemvEntries) {
    moe_router_logits(x, rows, H, lw.mlp_norm.w.as<float>(), config_.norm_eps, m.router.as<float>(), mc.num_experts,
                      logits, stream_);
    moe_topk_permute(logits, rows, mc.num_experts, mc.top_k, mc.norm_topk_prob, weights, layout_.expert_begin, n_local,
                     offsets, moe_active_.as<int32_t>(), moe_tiles_.as<int32_t>(), slot, moe_row_token_.as<int32_t>(),
                     stream_);
  } else {
    moe_route(x, rows, H, lw.mlp_norm.w.as<float>(), config_.norm_eps, m.router.as<float>(), mc.num_experts,
              mc.top_k, mc.norm_topk_prob, logits, ids, weights, stream_);
    moe_permute(ids, rows, mc.top_k, layout_.expert_begin, n_local, offsets, moe_active_.as<int32_t>(),
                moe_tiles_.as<int32_t>(), slot, moe_row_token_.as<int32_t>(), stream_);
  }
  norm(x, xn_.get(), dt_, rows, H, lw.mlp_norm.w.as<float>(), nullptr, config_.norm_eps, stream_);
  moe_experts(m, entries);
  const float* shared = nullptr;
  if (!m.shared_up.w.empty()) {
    // Qwen2-MoE's shared expert: a dense gated MLP of this rank's columns, scaled per row by sigmoid(gate · xn)
    // (the gate's dot product in moe_combine, against its fp32 weights).
    linear(m.shared_up, xn_.get(), rows, mlp_.get(), false, false);
    gated_activation(mlp_.get(), mlp_act_.get(), dt_, rows, m.shared_up.out / 2, act_, nullptr, stream_);
    linear(m.shared_down, mlp_act_.get(), rows, moe_shared_y_.get(), true, false);
    shared = moe_shared_y_.as<float>();
  }
  const float* gate_w = m.shared_gate.as<float>();
  if (tp_.size() == 1) {
    moe_combine(moe_y_.as<float>(), slot, weights, rows, mc.top_k, H, x, shared, xn_.get(), dt_, gate_w, x, stream_);
    return;
  }
  // As row_parallel: tp rank 0 adds onto the residual stream, the others contribute their partial sums.
  float* out = moe_out_.as<float>();
  moe_combine(moe_y_.as<float>(), slot, weights, rows, mc.top_k, H, tp_.rank() == 0 ? x : nullptr, shared, xn_.get(),
              dt_, gate_w, out, stream_);
  all_reduce(out, static_cast<size_t>(rows * H));
  check_cuda(cudaMemcpyAsync(x, out, sizeof(float) * static_cast<size_t>(rows * H), cudaMemcpyDeviceToDevice, stream_),
             "copy the MoE output");
}

}  // namespace engine::cuda
