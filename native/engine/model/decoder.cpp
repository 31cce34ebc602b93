#include "model/decoder.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "cpu/gemm.h"
#include "cpu/norm.h"
#include "cpu/rope.h"
#include "errors.h"
#include "model/chunk-validation.h"

namespace engine {

namespace {
template <typename T>
T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}
}  // namespace

DecoderModel::DecoderModel(ModelConfig config, DecoderSpec spec, DecoderWeights weights, int32_t num_threads)
    : DecoderModel(config, spec, std::move(weights), num_threads, make_parallel_layout(config, ShardInfo{}), Comm(),
                   Comm()) {}

DecoderModel::DecoderModel(ModelConfig config, DecoderSpec spec, DecoderWeights weights, int32_t num_threads,
                           ParallelLayout layout, Comm tp_comm, Comm pp_comm)
    : config_(std::move(config)),
      spec_(spec),
      w_(std::move(weights)),
      num_threads_(num_threads),
      layout_(layout),
      tp_(std::move(tp_comm)),
      pp_(std::move(pp_comm)) {
  num_heads_ = layout_.local_heads();
  num_kv_heads_ = layout_.local_kv_heads();
  num_layers_ = layout_.local_layers();
  inter_ = layout_.local_inter();
  q_dim_ = static_cast<int64_t>(num_heads_) * config_.head_dim;
  kv_dim_ = static_cast<int64_t>(num_kv_heads_) * config_.head_dim;
  if (static_cast<int32_t>(w_.layers.size()) != num_layers_)
    throw EngineError(ErrorCode::internal, "decoder got " + std::to_string(w_.layers.size()) +
                                               " layers of weights for a stage of " + std::to_string(num_layers_));
  if (spec_.rope) inv_freq_ = cpu::rope_inv_freq(config_.head_dim, config_.rope_theta, config_.rope_scaling);
}

size_t DecoderModel::kv_bytes_per_token() const {
  return static_cast<size_t>(num_layers_) * 2 * static_cast<size_t>(kv_dim_) * sizeof(float);
}

void DecoderModel::allocate_kv(int32_t num_blocks, int32_t tokens_per_block) {
  if (num_blocks <= 0 || tokens_per_block <= 0)
    throw EngineError(ErrorCode::invalid_argument, "allocate_kv needs num_blocks > 0 and tokens_per_block > 0, got " +
                                                       std::to_string(num_blocks) + " and " +
                                                       std::to_string(tokens_per_block));
  const size_t per_layer = static_cast<size_t>(num_blocks) * tokens_per_block * kv_dim_;
  k_pool_.clear();
  v_pool_.clear();
  for (int32_t l = 0; l < num_layers_; ++l) {
    // Uninitialized on purpose: pages are only touched (and committed) once blocks are written.
    k_pool_.emplace_back(new float[per_layer]);
    v_pool_.emplace_back(new float[per_layer]);
  }
  num_blocks_ = num_blocks;
  tokens_per_block_ = tokens_per_block;
}

void DecoderModel::copy_kv_block(int32_t src, int32_t dst) {
  if (src < 0 || src >= num_blocks_ || dst < 0 || dst >= num_blocks_)
    throw EngineError(ErrorCode::internal, "copy_kv_block(" + std::to_string(src) + ", " + std::to_string(dst) +
                                               ") outside the pool of " + std::to_string(num_blocks_) + " blocks");
  if (src == dst) return;
  // A block is contiguous in each per-layer array: [num_kv_heads, tokens_per_block, head_dim].
  const size_t block = static_cast<size_t>(tokens_per_block_) * static_cast<size_t>(kv_dim_);
  for (int32_t l = 0; l < num_layers_; ++l) {
    std::memcpy(k_pool_[l].get() + static_cast<size_t>(dst) * block, k_pool_[l].get() + static_cast<size_t>(src) * block,
                block * sizeof(float));
    std::memcpy(v_pool_[l].get() + static_cast<size_t>(dst) * block, v_pool_[l].get() + static_cast<size_t>(src) * block,
                block * sizeof(float));
  }
}

size_t DecoderModel::weight_bytes() const {
  size_t n = w_.embed.size() + w_.pos_embed.size() + w_.lm_head.size() + w_.final_norm.w.size() +
             w_.final_norm.b.size();
  for (const auto& l : w_.layers) {
    for (const Norm* nm : {&l.attn_norm, &l.mlp_norm}) n += nm->w.size() + nm->b.size();
    for (const Linear* li : {&l.qkv, &l.o, &l.up, &l.down}) n += li->w.size() + li->b.size();
  }
  return n * sizeof(float);
}

void DecoderModel::validate(const std::vector<SequenceChunk>& chunks) const {
  validate_chunks(chunks, config_, !spec_.rope, num_blocks_, tokens_per_block_);
}

void DecoderModel::norm(const Norm& n, const float* x, float* out, int64_t rows) const {
  if (spec_.rms_norm)
    cpu::rms_norm(x, out, rows, config_.hidden_size, n.w.data(), config_.norm_eps);
  else
    cpu::layer_norm(x, out, rows, config_.hidden_size, n.w.data(), n.b.data(), config_.norm_eps);
}

void DecoderModel::linear(const Linear& l, const float* x, int64_t rows, float* y, bool accumulate) const {
  if (!l.b.empty()) {
    // The bias is laid down (or added) first so the GEMM can accumulate onto it in a single pass.
    for (int64_t r = 0; r < rows; ++r) {
      float* yr = y + r * l.out;
      if (accumulate)
        for (int64_t i = 0; i < l.out; ++i) yr[i] += l.b[i];
      else
        std::memcpy(yr, l.b.data(), sizeof(float) * l.out);
    }
    accumulate = true;
  }
  cpu::gemm_xwt(rows, l.out, l.in, x, l.in, l.w.data(), y, l.out, accumulate);
}

template <typename Fn>
void DecoderModel::timed_comm(size_t bytes, Fn fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  comm_stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  comm_stats_.bytes += bytes;
  ++comm_stats_.calls;
}

void DecoderModel::linear_row_parallel(const Linear& l, const float* x, int64_t rows, float* y) {
  if (tp_.size() == 1) {
    linear(l, x, rows, y, true);
    return;
  }
  // The residual stream y is the same on every tp rank: rank 0 adds its partial product onto it, the others
  // overwrite it with theirs, so one in-place all-reduce yields y + sum of partials (+ the bias, which only rank 0
  // holds) without a separate buffer.
  linear(l, x, rows, y, tp_.rank() == 0);
  const size_t n = static_cast<size_t>(rows * l.out);
  timed_comm(n * sizeof(float), [&] { tp_.all_reduce_sum(y, n); });
}

void DecoderModel::embed(const std::vector<SequenceChunk>& chunks, const int32_t* positions, float* x) {
  const int64_t H = config_.hidden_size;
  const int64_t v0 = layout_.vocab_begin, nv = layout_.local_real_vocab(config_.vocab_size);
  int64_t row = 0;
  for (const auto& ch : chunks)
    for (int32_t t : ch.tokens) {
      float* xr = x + row * H;
      const int64_t local = t - v0;
      if (local >= 0 && local < nv)
        std::memcpy(xr, w_.embed.data() + local * H, sizeof(float) * H);
      else
        std::fill(xr, xr + H, 0.0f);
      ++row;
    }
  // Vocab parallel: each token's row came from the one tp rank owning its id, the others contributed zeros.
  if (tp_.size() > 1) {
    const size_t n = static_cast<size_t>(row * H);
    timed_comm(n * sizeof(float), [&] { tp_.all_reduce_sum(x, n); });
  }
  if (!spec_.rope)
    for (int64_t r = 0; r < row; ++r) {
      const float* pe = w_.pos_embed.data() + static_cast<int64_t>(positions[r]) * H;
      for (int64_t i = 0; i < H; ++i) x[r * H + i] += pe[i];
    }
}

void DecoderModel::lm_head(const float* xn, int64_t rows, ForwardOutput& out) {
  const int64_t H = config_.hidden_size, V = config_.vocab_size;
  const float* head = w_.lm_head.empty() ? w_.embed.data() : w_.lm_head.data();
  out.logits.resize(static_cast<size_t>(rows * V));
  if (tp_.size() == 1) {
    cpu::gemm_xwt(rows, V, H, xn, H, head, out.logits.data(), V, false);
    return;
  }
  const int64_t Vl = layout_.local_vocab(), real = layout_.local_real_vocab(V);
  float* local = grow(logits_local_, static_cast<size_t>(rows * Vl));
  cpu::gemm_xwt(rows, Vl, H, xn, H, head, local, Vl, false);
  // Padding rows of the head are zero; -inf keeps them out of any softmax or argmax that might see them.
  for (int64_t r = 0; r < rows; ++r)
    std::fill(local + r * Vl + real, local + (r + 1) * Vl, -std::numeric_limits<float>::infinity());
  const int32_t tp = tp_.size();
  float* all = grow(logits_gathered_, static_cast<size_t>(tp) * rows * Vl);
  timed_comm(static_cast<size_t>(rows * Vl) * sizeof(float),
             [&] { tp_.all_gather(local, static_cast<size_t>(rows * Vl), all); });
  // `all` is [tp, rows, Vl]; rank t's slice is columns [t * Vl, (t + 1) * Vl) of [rows, V], padding trimmed.
  for (int64_t r = 0; r < rows; ++r)
    for (int32_t t = 0; t < tp; ++t) {
      const int64_t c0 = t * Vl, n = std::min(Vl, V - c0);
      if (n <= 0) break;
      std::memcpy(out.logits.data() + r * V + c0, all + (t * rows + r) * Vl, sizeof(float) * n);
    }
}

void DecoderModel::forward(const std::vector<SequenceChunk>& chunks, ForwardOutput& out) {
  validate(chunks);
  if (std::this_thread::get_id() != threads_set_for_) {
    cpu::set_num_threads(num_threads_);
    threads_set_for_ = std::this_thread::get_id();
  }
  comm_stats_ = {};
  // Pipeline messages carry the iteration in their tag (MPI guarantees tags up to 32767), so a stage that got out
  // of step would fail to match instead of silently consuming another iteration's activations.
  const int32_t tag_act = static_cast<int32_t>(iteration_++ % 16384) * 2, tag_logits = tag_act + 1;
  const int64_t H = config_.hidden_size, V = config_.vocab_size;
  const int32_t hd = config_.head_dim, half = hd / 2;

  // Layout of the iteration: every chunk's tokens as consecutive rows of one activation matrix.
  int64_t T = 0;
  for (const auto& c : chunks) T += static_cast<int64_t>(c.tokens.size());
  out.vocab_size = static_cast<int32_t>(V);
  out.first_row.assign(chunks.size(), 0);
  out_rows_.clear();
  att_chunks_.clear();
  int32_t* positions = grow(positions_, T);
  int32_t* row_chunk = grow(row_chunk_, T);
  {
    int64_t row = 0;
    for (size_t c = 0; c < chunks.size(); ++c) {
      const auto& ch = chunks[c];
      const int32_t n = static_cast<int32_t>(ch.tokens.size());
      att_chunks_.push_back({ch.past_len, n, row, ch.block_ids.data()});
      out.first_row[c] = static_cast<int32_t>(out_rows_.size());
      for (int32_t i = 0; i < n; ++i) {
        positions[row + i] = ch.past_len + i;
        row_chunk[row + i] = static_cast<int32_t>(c);
        if (ch.all_logits || i == n - 1) out_rows_.push_back(row + i);
      }
      row += n;
    }
  }
  const int64_t R = static_cast<int64_t>(out_rows_.size());
  if (T == 0) {
    out.logits.clear();
    return;
  }

  float* x = grow(x_, T * H);
  float* xn = grow(xn_, T * H);
  const int64_t qkv_w = q_dim_ + 2 * kv_dim_;
  float* qkv = grow(qkv_, T * qkv_w);
  float* attn = grow(attn_, T * q_dim_);
  const int64_t inter = inter_;
  float* mlp = grow(mlp_, T * (spec_.gated_mlp ? 2 * inter : inter));
  float* mlp_act = spec_.gated_mlp ? grow(mlp_act_, T * inter) : mlp;

  if (layout_.first_stage()) {
    embed(chunks, positions, x);
  } else {
    const size_t bytes = static_cast<size_t>(T * H) * sizeof(float);
    timed_comm(bytes, [&] { pp_.recv(x, bytes, pp_.rank() - 1, tag_act); });
  }
  float *cos_t = nullptr, *sin_t = nullptr;
  if (spec_.rope) {
    cos_t = grow(cos_, T * half);
    sin_t = grow(sin_, T * half);
    cpu::rope_tables(positions, T, inv_freq_.data(), half, cos_t, sin_t);
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

  int64_t rows = T;  // rows still carried: all tokens until the model's last attention, then only logit rows
  for (int32_t l = 0; l < num_layers_; ++l) {
    const DecoderLayerWeights& lw = w_.layers[l];
    const bool last = layout_.last_stage() && l == num_layers_ - 1;
    cpu::PagedKv pool{k_pool_[l].get(), v_pool_[l].get(), num_blocks_, num_kv_heads_, tokens_per_block_, hd};

    norm(lw.attn_norm, x, xn, T);
    linear(lw.qkv, xn, T, qkv, false);
    if (spec_.rope) {
      cpu::apply_rope(qkv, T, qkv_w, num_heads_, half, cos_t, sin_t);
      cpu::apply_rope(qkv + q_dim_, T, qkv_w, num_kv_heads_, half, cos_t, sin_t);
    }
    cpu::write_kv(pool, att_chunks_, qkv + q_dim_, qkv + q_dim_ + kv_dim_, qkv_w);
    if (last) {
      // Only rows that produce logits matter past this point (K/V of every token are already written), so the
      // last layer's attention, out projection and MLP run on those rows alone.
      cpu::paged_attention(pool, att_chunks_, row_chunk, out_rows_.data(), R, qkv, qkv_w, num_heads_, scale, attn,
                           q_dim_);
      for (int64_t i = 0; i < R; ++i)
        if (out_rows_[i] != i) std::memcpy(x + i * H, x + out_rows_[i] * H, sizeof(float) * H);
      rows = R;
    } else {
      cpu::paged_attention(pool, att_chunks_, row_chunk, nullptr, T, qkv, qkv_w, num_heads_, scale, attn, q_dim_);
    }
    linear_row_parallel(lw.o, attn, rows, x);

    norm(lw.mlp_norm, x, xn, rows);
    linear(lw.up, xn, rows, mlp, false);
    if (spec_.gated_mlp)
      cpu::gated_activate(mlp, mlp_act, rows, inter, spec_.act);
    else
      cpu::activate(mlp, rows * inter, spec_.act);
    linear_row_parallel(lw.down, mlp_act, rows, x);
  }

  if (!layout_.last_stage()) {
    // Every tp rank hands its (identical) activations to the same tp rank of the next stage.
    const size_t bytes = static_cast<size_t>(T * H) * sizeof(float);
    timed_comm(bytes, [&] { pp_.send(x, bytes, pp_.rank() + 1, tag_act); });
    if (layout_.leader()) {
      out.logits.resize(static_cast<size_t>(R * V));
      const size_t lbytes = out.logits.size() * sizeof(float);
      timed_comm(lbytes, [&] { pp_.recv(out.logits.data(), lbytes, pp_.size() - 1, tag_logits); });
    } else {
      out.logits.clear();
    }
    return;
  }

  norm(w_.final_norm, x, xn, R);
  lm_head(xn, R, out);
  // The leader (stage 0, tp rank 0) schedules and samples: the last stage's tp rank 0 (same pp group) sends it
  // the logits.
  if (pp_.size() > 1 && tp_.rank() == 0) {
    const size_t lbytes = out.logits.size() * sizeof(float);
    timed_comm(lbytes, [&] { pp_.send(out.logits.data(), lbytes, 0, tag_logits); });
  }
}

}  // namespace engine
