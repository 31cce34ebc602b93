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
#include "model/model-checks.h"
#include "model/scratch.h"

namespace engine {

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
  keep_hidden_ = !w_.fc.w.empty();  // an EAGLE draft's output is its next guess's feature
  if (!w_.lm_head_ids.empty() &&
      static_cast<int64_t>(w_.lm_head.size()) != static_cast<int64_t>(w_.lm_head_ids.size()) * config_.hidden_size)
    throw EngineError(ErrorCode::internal, "decoder got " + std::to_string(w_.lm_head_ids.size()) +
                                               " LM head ids for an LM head of " +
                                               std::to_string(w_.lm_head.size() / config_.hidden_size) + " rows");
  if (spec_.rope) inv_freq_ = cpu::rope_inv_freq(config_.head_dim, config_.rope_theta, config_.rope_scaling);
  if (spec_.rope && config_.rope_scaling.longrope())
    inv_freq_long_ = cpu::rope_inv_freq(config_.head_dim, config_.rope_theta, config_.rope_scaling, true);
}

float attention_scale(const ModelConfig& c) {
  const float base = c.query_scale > 0 ? c.query_scale : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  // longrope scales cos and sin by attention_factor, so every q.k by its square: applied here instead.
  const float f = c.rope_scaling.longrope() ? c.rope_scaling.attention_factor : 1.0f;
  return base * f * f;
}

void soft_cap(float* x, size_t n, float cap) {
  if (cap <= 0) return;
#pragma omp parallel for schedule(static) if (n > 65536)
  for (size_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

size_t DecoderModel::kv_bytes_per_token() const {
  return static_cast<size_t>(num_layers_) * 2 * static_cast<size_t>(kv_dim_) * cpu::kv_element_bytes(kv_storage_);
}

std::string DecoderModel::kv_cache_dtype() const {
  return kv_storage_ == cpu::KvStorage::e4m3 ? fp8_kv_dtype_name(kv_scales_from_) : "float32";
}

void DecoderModel::use_fp8_kv(std::vector<float> k_scales, std::vector<float> v_scales, std::string scales_from) {
  complete_kv_scales(k_scales, v_scales, num_layers_);
  kv_storage_ = cpu::KvStorage::e4m3;
  k_scales_ = std::move(k_scales);
  v_scales_ = std::move(v_scales);
  kv_scales_from_ = std::move(scales_from);
}

void DecoderModel::allocate_kv(int32_t num_blocks, int32_t tokens_per_block) {
  check_kv_allocation(num_blocks, tokens_per_block);
  const size_t per_layer =
      static_cast<size_t>(num_blocks) * tokens_per_block * kv_dim_ * cpu::kv_element_bytes(kv_storage_);
  k_pool_.clear();
  v_pool_.clear();
  for (int32_t l = 0; l < num_layers_; ++l) {
    // Uninitialized on purpose: pages are only touched (and committed) once blocks are written.
    k_pool_.emplace_back(new uint8_t[per_layer]);
    v_pool_.emplace_back(new uint8_t[per_layer]);
  }
  num_blocks_ = num_blocks;
  tokens_per_block_ = tokens_per_block;
}

void DecoderModel::copy_kv_block(int32_t src, int32_t dst) {
  check_kv_block_copy(src, dst, num_blocks_);
  if (src == dst) return;
  // A block is contiguous in each per-layer array: [num_kv_heads, tokens_per_block, head_dim].
  const size_t block =
      static_cast<size_t>(tokens_per_block_) * static_cast<size_t>(kv_dim_) * cpu::kv_element_bytes(kv_storage_);
  for (int32_t l = 0; l < num_layers_; ++l) {
    std::memcpy(k_pool_[l].get() + static_cast<size_t>(dst) * block, k_pool_[l].get() + static_cast<size_t>(src) * block,
                block);
    std::memcpy(v_pool_[l].get() + static_cast<size_t>(dst) * block, v_pool_[l].get() + static_cast<size_t>(src) * block,
                block);
  }
}

size_t DecoderModel::weight_bytes() const {
  size_t n = w_.embed.size() + w_.pos_embed.size() + w_.lm_head.size() + w_.final_norm.w.size() +
             w_.final_norm.b.size() + w_.fc.w.size() + w_.fc.b.size();
  n += w_.lm_head_ids.size();  // (int32, as a float)
  for (const auto& l : w_.layers) {
    for (const Norm* nm :
         {&l.attn_norm, &l.hidden_norm, &l.mlp_norm, &l.q_norm, &l.k_norm, &l.post_attn_norm, &l.post_mlp_norm})
      n += nm->w.size() + nm->b.size();
    for (const Linear* li : {&l.qkv, &l.o, &l.up, &l.down, &l.moe.router, &l.moe.shared.up, &l.moe.shared.down,
                             &l.moe.shared_gate})
      n += li->w.size() + li->b.size();
    for (const ExpertWeights& e : l.moe.experts) n += e.up.w.size() + e.down.w.size();
  }
  return n * sizeof(float);
}

void DecoderModel::validate(const std::vector<SequenceChunk>& chunks) const {
  validate_chunks(chunks, config_, !spec_.rope, num_blocks_, tokens_per_block_, /*prompt_tables=*/true);
}

void DecoderModel::norm(const Norm& n, const float* x, float* out, int64_t rows) const {
  if (n.w.empty()) {  // none here (an EAGLE draft's first input norm and final norm)
    if (out != x) std::memcpy(out, x, sizeof(float) * static_cast<size_t>(rows * config_.hidden_size));
    return;
  }
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

void DecoderModel::all_reduce_tp(float* x, size_t n) {
  timed_comm(n * sizeof(float), [&] { tp_.all_reduce_sum(x, n); });
}

void DecoderModel::load_lora(int32_t slot, const LoraAdapter& adapter) {
  lora_.load(slot, localize_lora(adapter, config_, layout_));
}

void DecoderModel::unload_lora(int32_t slot) { lora_.unload(slot); }

void DecoderModel::head_guesses(const std::vector<int32_t>& rows, std::vector<int32_t>& out) {
  if (!medusa_) throw EngineError(ErrorCode::internal, "head_guesses without Medusa heads");
  const int64_t H = config_.hidden_size, n = static_cast<int64_t>(rows.size());
  medusa_rows_.resize(static_cast<size_t>(n * H));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = rows[static_cast<size_t>(i)];
    if (r < 0 || (r + 1) * H > static_cast<int64_t>(final_hidden_.size()))
      throw EngineError(ErrorCode::internal, "head_guesses: row " + std::to_string(r) + " is not a logits row of the last forward");
    std::copy_n(final_hidden_.data() + r * H, H, medusa_rows_.data() + i * H);
  }
  out.resize(static_cast<size_t>(n * medusa_->num_heads() * kMedusaTopK));
  medusa_guesses(*medusa_, medusa_rows_.data(), n, out.data(), medusa_scratch_);
}

bool DecoderModel::supports_token_trees() const { return token_trees_fit(config_); }

void DecoderModel::set_medusa_heads(std::shared_ptr<const MedusaHeads> heads) {
  if (heads) check_medusa_heads(*heads, config_, layout_.last_stage(), pp_.rank(), pp_.size());
  medusa_ = std::move(heads);
  keep_hidden_ = keep_hidden_ || medusa_ != nullptr;
}

void DecoderModel::keep_final_hidden(const std::vector<int32_t>& aux_layers) {
  if (pp_.size() > 1)
    throw EngineError(ErrorCode::unsupported, "EAGLE heads (--eagle-heads) read the model's final hidden states on the "
                                              "leading rank, and with pp " + std::to_string(pp_.size()) +
                                                  " they are on the last stage; use --medusa-heads or --draft-model");
  for (int32_t l : aux_layers)
    if (l < 0 || l > num_layers_)
      throw EngineError(ErrorCode::unsupported, "EAGLE-3 heads read layer " + std::to_string(l) +
                                                    "'s hidden states; the model has layers 0.." +
                                                    std::to_string(num_layers_ - 1) + " (and " +
                                                    std::to_string(num_layers_) + ": after the last)");
  aux_layers_ = aux_layers;
  keep_hidden_ = keep_hidden_ || aux_layers_.empty();  // (the aux rows are kept by run_layers)
}

const float* DecoderModel::final_hidden(int64_t& rows) const {
  if (!aux_layers_.empty()) {
    rows = static_cast<int64_t>(aux_hidden_.size() / aux_layers_.size()) / config_.hidden_size;
    return aux_hidden_.data();
  }
  rows = static_cast<int64_t>(final_hidden_.size()) / config_.hidden_size;
  return final_hidden_.data();
}

const int32_t* DecoderModel::lora_row_slots(bool logit_rows_only) const {
  if (row_slot_.empty()) return nullptr;
  return logit_rows_only ? out_row_slot_.data() : row_slot_.data();
}

void DecoderModel::add_lora(const LoraRows& lora, const float* x, int64_t ldx, int64_t rows, float* y, int64_t ldy) {
  if (lora.row_slot != nullptr) lora_.apply(lora.layer, lora.target, x, ldx, rows, lora.row_slot, y, ldy);
}

void DecoderModel::linear_row_parallel(const Linear& l, const float* x, int64_t rows, float* y, const LoraRows& lora) {
  if (tp_.size() == 1) {
    linear(l, x, rows, y, true);
    add_lora(lora, x, l.in, rows, y, l.out);
    return;
  }
  // The residual stream y is the same on every tp rank: rank 0 adds its partial product onto it, the others
  // overwrite it with theirs, so one in-place all-reduce yields y + sum of partials (+ the bias, which only rank 0
  // holds) without a separate buffer.
  linear(l, x, rows, y, tp_.rank() == 0);
  add_lora(lora, x, l.in, rows, y, l.out);
  all_reduce_tp(y, static_cast<size_t>(rows * l.out));
}

void DecoderModel::embed(const std::vector<SequenceChunk>& chunks, const int32_t* positions, float* x) {
  const int64_t H = config_.hidden_size;
  const int64_t v0 = layout_.vocab_begin, nv = layout_.local_real_vocab(config_.vocab_size);
  int64_t row = 0;
  for (const auto& ch : chunks)
    for (int32_t t : ch.tokens) {
      float* xr = x + row * H;
      const int64_t local = t - v0;
      // A virtual token (p-tuning) takes its table row; under tp one rank writes it, as one owns each real id.
      const float* virt = prompt_table_row(ch.prompt_table.get(), t, config_.vocab_size);
      const float* src = virt != nullptr ? (tp_.rank() == 0 ? virt : nullptr)
                         : local >= 0 && local < nv ? w_.embed.data() + local * H : nullptr;
      if (src != nullptr) {
        std::memcpy(xr, src, sizeof(float) * H);
        if (config_.embed_scale != 1.0f)
          for (int64_t i = 0; i < H; ++i) xr[i] *= config_.embed_scale;
      } else
        std::fill(xr, xr + H, 0.0f);
      ++row;
    }
  // Vocab parallel: each token's row came from the one tp rank owning its id, the others contributed zeros.
  if (tp_.size() > 1) all_reduce_tp(x, static_cast<size_t>(row * H));
  if (!spec_.rope)
    for (int64_t r = 0; r < row; ++r) {
      const float* pe = w_.pos_embed.data() + static_cast<int64_t>(positions[r]) * H;
      for (int64_t i = 0; i < H; ++i) x[r * H + i] += pe[i];
    }
}

void DecoderModel::mix_features(float* x, int64_t T) {
  if (input_features_ == nullptr)
    throw EngineError(ErrorCode::internal, "an EAGLE draft's forward() without its feature rows (set_input_features)");
  const int64_t H = config_.hidden_size;
  const float* features = input_features_;
  const int64_t width = input_width_;
  input_features_ = nullptr;
  if (eagle3_draft()) {
    // EAGLE-3: the embeddings join the layer's input later ([attn_norm(e); hidden_norm(x)]), x is the model's
    // residual streams through fc (a slot the model computed) or the draft's own output (a guess's slot).
    std::copy_n(x, T * H, grow(eagle_embed_, T * H));
    if (width == w_.fc.in)
      linear(w_.fc, features, T, x, false);
    else if (width == H)
      std::copy_n(features, T * H, x);
    else
      throw EngineError(ErrorCode::internal, "an EAGLE-3 draft's feature rows are " + std::to_string(width) +
                                                 " wide; fc takes " + std::to_string(w_.fc.in) + ", a guess " +
                                                 std::to_string(H));
    return;
  }
  if (width != H)
    throw EngineError(ErrorCode::internal, "an EAGLE draft's feature rows are " + std::to_string(width) +
                                               " wide, not the hidden size " + std::to_string(H));
  float* in = grow(fc_in_, T * 2 * H);
  for (int64_t r = 0; r < T; ++r) {  // [embedding; feature], embedding first (EAGLE's torch.cat order)
    std::memcpy(in + r * 2 * H, x + r * H, sizeof(float) * static_cast<size_t>(H));
    std::memcpy(in + r * 2 * H + H, features + r * H, sizeof(float) * static_cast<size_t>(H));
  }
  linear(w_.fc, in, T, x, false);
}

const float* DecoderModel::eagle3_layer_input(const DecoderLayerWeights& lw, const float* x, int64_t T) {
  const int64_t H = config_.hidden_size;
  float* e = grow(eagle_norm_, T * H);
  float* h = grow(xn_, T * H);
  norm(lw.attn_norm, eagle_embed_.data(), e, T);
  norm(lw.hidden_norm, x, h, T);
  float* in = grow(fc_in_, T * 2 * H);
  for (int64_t r = 0; r < T; ++r) {  // [embedding; hidden], embedding first (EAGLE-3's torch.cat order)
    std::memcpy(in + r * 2 * H, e + r * H, sizeof(float) * static_cast<size_t>(H));
    std::memcpy(in + r * 2 * H + H, h + r * H, sizeof(float) * static_cast<size_t>(H));
  }
  return in;
}

void DecoderModel::keep_aux_rows(int32_t layer, const float* x, int64_t R, bool compacted) {
  const int64_t H = config_.hidden_size, n = static_cast<int64_t>(aux_layers_.size());
  for (int64_t j = 0; j < n; ++j) {
    if (aux_layers_[static_cast<size_t>(j)] != layer) continue;
    for (int64_t r = 0; r < R; ++r) {
      const int64_t from = compacted ? r : batch_.out_rows[static_cast<size_t>(r)];
      std::memcpy(aux_hidden_.data() + (r * n + j) * H, x + from * H, sizeof(float) * static_cast<size_t>(H));
    }
  }
}

void DecoderModel::lm_head(const float* xn, int64_t rows, ForwardOutput& out) {
  const int64_t H = config_.hidden_size, V = config_.vocab_size;
  const float* head = w_.lm_head.empty() ? w_.embed.data() : w_.lm_head.data();
  out.logits.resize(static_cast<size_t>(rows * V));
  if (!w_.lm_head_ids.empty()) {  // EAGLE-3's own vocabulary: each row's logit lands on its target id
    const int64_t Vd = static_cast<int64_t>(w_.lm_head_ids.size());
    float* local = grow(lm_head_local_, static_cast<size_t>(rows * Vd));
    cpu::gemm_xwt(rows, Vd, H, xn, H, head, local, Vd, false);
    std::fill(out.logits.begin(), out.logits.end(), -std::numeric_limits<float>::infinity());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < Vd; ++i) out.logits[static_cast<size_t>(r * V + w_.lm_head_ids[i])] = local[r * Vd + i];
    return;
  }
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
  if (!pending_.empty()) throw EngineError(ErrorCode::internal, "forward() while pipelined passes are in flight");
  PendingTransfer logits;
  run_stage(chunks, out, logits);
  if (logits.pending()) timed_comm(out.logits.size() * sizeof(float), [&] { logits.wait(); });
}

int32_t DecoderModel::pipeline_depth() const { return layout_.leader() ? pp_.size() : 1; }

void DecoderModel::forward_begin(const std::vector<SequenceChunk>& chunks) {
  if (static_cast<int32_t>(pending_.size()) >= pipeline_depth())
    throw EngineError(ErrorCode::internal, "forward_begin with " + std::to_string(pending_.size()) +
                                               " passes in flight (pipeline depth " + std::to_string(pipeline_depth()) + ")");
  PendingPass& pass = pending_.emplace_back();
  try {
    run_stage(chunks, pass.out, pass.logits);
  } catch (...) {
    pending_.pop_back();
    throw;
  }
  pass.comm = comm_stats_;
}

void DecoderModel::forward_end(ForwardOutput& out) {
  if (pending_.empty()) throw EngineError(ErrorCode::internal, "forward_end with no pass in flight");
  PendingPass pass = std::move(pending_.front());
  pending_.pop_front();
  comm_stats_ = pass.comm;
  // Time spent here is the later stages still computing this micro-batch (what pipelining overlaps).
  if (pass.logits.pending()) timed_comm(pass.out.logits.size() * sizeof(float), [&] { pass.logits.wait(); });
  out = std::move(pass.out);
}

void DecoderModel::run_stage(const std::vector<SequenceChunk>& chunks, ForwardOutput& out, PendingTransfer& logits) {
  validate(chunks);
  if (std::this_thread::get_id() != threads_set_for_) {
    cpu::set_num_threads(num_threads_);
    threads_set_for_ = std::this_thread::get_id();
  }
  comm_stats_ = {};
  // Pipeline messages carry the iteration in their tag (MPI guarantees tags up to 32767), so a stage that got out
  // of step would fail to match instead of silently consuming another iteration's activations.
  const int32_t tag_act = static_cast<int32_t>(iteration_++ % 16384) * 2, tag_logits = tag_act + 1;
  const int64_t H = config_.hidden_size;

  layout_batch(chunks, samples_on_device(), config_.vocab_size, batch_, out);
  const int64_t T = batch_.num_tokens, R = batch_.num_out_rows();
  row_slot_.clear();
  out_row_slot_.clear();
  bool any_lora = false;
  for (const SequenceChunk& c : chunks) any_lora = any_lora || c.lora_slot >= 0;
  if (any_lora && !lora_.empty()) {
    row_slot_.resize(static_cast<size_t>(T));
    out_row_slot_.resize(static_cast<size_t>(R));
    for (int64_t t = 0; t < T; ++t) row_slot_[t] = chunks[batch_.token_chunk[t]].lora_slot;
    for (int64_t r = 0; r < R; ++r) out_row_slot_[r] = chunks[batch_.out_chunk[r]].lora_slot;
  }
  att_chunks_.clear();
  tree_visible_.assign(static_cast<size_t>(T), 0);
  for (size_t c = 0; c < chunks.size(); ++c) {
    att_chunks_.push_back({chunks[c].past_len, static_cast<int32_t>(chunks[c].tokens.size()),
                           batch_.chunk_first_row[c], chunks[c].block_ids.data(), chunks[c].window});
    const std::vector<int32_t>& parents = chunks[c].tree_parents;
    if (parents.empty()) continue;
    // Bits over the whole tree, its nodes in the past first (SequenceChunk::tree_past); the chunk's rows keep theirs.
    tree_bits_.resize(parents.size());
    for (size_t i = 0; i < parents.size(); ++i)
      tree_bits_[i] = (i == 0 ? 0 : tree_bits_[static_cast<size_t>(parents[i])]) | (uint64_t{1} << i);  // its ancestors' and itself
    uint64_t* visible = tree_visible_.data() + batch_.chunk_first_row[c];
    std::copy(tree_bits_.begin() + chunks[c].tree_past, tree_bits_.end(), visible);
    att_chunks_.back().tree_visible = visible;
    att_chunks_.back().tree_past = chunks[c].tree_past;
  }
  if (T == 0) {
    out.logits.clear();
    return;
  }

  float* x = grow(x_, T * H);
  if (layout_.first_stage()) {
    embed(chunks, batch_.positions.data(), x);
    if (!w_.fc.w.empty()) mix_features(x, T);
  } else {
    const size_t bytes = static_cast<size_t>(T * H) * sizeof(float);
    timed_comm(bytes, [&] { pp_.recv(x, bytes, pp_.rank() - 1, tag_act); });
  }
  run_layers(x, T, R);
  if (!layout_.last_stage()) {
    pass_to_next_stage(x, T, R, tag_act, tag_logits, out, logits);
    return;
  }
  float* xn = grow(xn_, T * H);
  norm(w_.final_norm, x, xn, R);
  // Kept for Medusa or EAGLE heads, after the executor's draws: the rows after the final norm, or an EAGLE-3
  // draft's before it (its next guess's feature, as EAGLE-3 feeds back).
  if (keep_hidden_) {
    const float* kept = eagle3_draft() ? x : xn;
    final_hidden_.assign(kept, kept + R * H);
  }
  lm_head(xn, R, out);
  soft_cap(out.logits.data(), out.logits.size(), config_.final_softcap);
  // The leader (stage 0, tp rank 0) schedules and samples: the last stage's tp rank 0 (same pp group) sends it
  // the logits — without waiting for the send to finish, since the leader may be computing the next micro-batch
  // and only takes them when it next enters MPI. A copy goes out, so `out` stays this rank's to read.
  if (pp_.size() > 1 && tp_.rank() == 0) {
    constexpr size_t kMaxOpenSends = 4;
    while (!logits_sends_.empty() && (logits_sends_.front().send.test() || logits_sends_.size() >= kMaxOpenSends)) {
      timed_comm(0, [&] { logits_sends_.front().send.wait(); });
      logits_sends_.pop_front();
    }
    LogitsSend& s = logits_sends_.emplace_back();
    s.data = out.logits;
    const size_t lbytes = s.data.size() * sizeof(float);
    timed_comm(lbytes, [&] { s.send = pp_.post_send(s.data.data(), lbytes, 0, tag_logits); });
  }
}

void DecoderModel::run_layers(float* x, int64_t T, int64_t R) {
  const int32_t half = config_.head_dim / 2;
  const float* cos_t = nullptr;
  const float* sin_t = nullptr;
  if (spec_.rope) {
    float* c = grow(cos_, T * half);
    float* sn = grow(sin_, T * half);
    const uint8_t* use_long = nullptr;
    if (!inv_freq_long_.empty()) {
      // longrope: a sequence longer than the original context after this step rotates by the long factors.
      use_long_.resize(static_cast<size_t>(T));
      for (int64_t t = 0; t < T; ++t) {
        const cpu::AttentionChunk& ch = att_chunks_[batch_.token_chunk[t]];
        use_long_[t] = ch.past_len + ch.n_tokens > config_.rope_scaling.original_max_position_embeddings;
      }
      use_long = use_long_.data();
    }
    cpu::rope_tables(batch_.positions.data(), T, inv_freq_.data(), half, c, sn, inv_freq_long_.data(), use_long);
    cos_t = c;
    sin_t = sn;
  }
  if (!aux_layers_.empty()) aux_hidden_.resize(static_cast<size_t>(R) * aux_layers_.size() * config_.hidden_size);
  for (int32_t l = 0; l < num_layers_; ++l) {
    // Past the model's last attention only rows that produce logits matter (K/V of every token are written by
    // then), so the last layer's out projection and MLP run on those rows alone.
    const bool last = layout_.last_stage() && l == num_layers_ - 1;
    if (!aux_layers_.empty()) keep_aux_rows(l, x, R, false);
    attention_block(l, x, T, last ? R : -1, cos_t, sin_t);
    mlp_block(l, x, last ? R : T, last);
  }
  if (!aux_layers_.empty()) keep_aux_rows(num_layers_, x, R, true);
}

void DecoderModel::attention_block(int32_t l, float* x, int64_t T, int64_t logit_rows, const float* cos_t,
                                   const float* sin_t) {
  const DecoderLayerWeights& lw = w_.layers[l];
  const int64_t H = config_.hidden_size, qkv_w = q_dim_ + 2 * kv_dim_;
  const int32_t hd = config_.head_dim, half = hd / 2;
  float* xn = grow(xn_, T * H);
  float* qkv = grow(qkv_, T * qkv_w);
  float* attn = grow(attn_, T * q_dim_);
  cpu::PagedKv pool{k_pool_[l].get(), v_pool_[l].get(), num_blocks_, num_kv_heads_, tokens_per_block_, hd, kv_storage_};
  if (kv_storage_ == cpu::KvStorage::e4m3) {
    pool.k_scale = k_scales_[l];
    pool.v_scale = v_scales_[l];
  }
  const cpu::AttentionScores how{attention_scale(config_), config_.attn_softcap,
                                 config_.window_of(layout_.layer_begin + l)};

  const float* in = xn;
  if (lw.hidden_norm.w.empty())
    norm(lw.attn_norm, x, xn, T);
  else
    in = eagle3_layer_input(lw, x, T);
  linear(lw.qkv, in, T, qkv, false);
  add_lora({l, LoraTarget::qkv, lora_row_slots(false)}, in, lw.qkv.in, T, qkv, qkv_w);
  if (!lw.q_norm.w.empty()) {
    cpu::head_rms_norm(qkv, T, qkv_w, num_heads_, hd, lw.q_norm.w.data(), config_.norm_eps);
    cpu::head_rms_norm(qkv + q_dim_, T, qkv_w, num_kv_heads_, hd, lw.k_norm.w.data(), config_.norm_eps);
  }
  if (spec_.rope) {
    cpu::apply_rope(qkv, T, qkv_w, num_heads_, half, cos_t, sin_t);
    cpu::apply_rope(qkv + q_dim_, T, qkv_w, num_kv_heads_, half, cos_t, sin_t);
  }
  cpu::write_kv(pool, att_chunks_, qkv + q_dim_, qkv + q_dim_ + kv_dim_, qkv_w);
  const int32_t* row_chunk = batch_.token_chunk.data();
  int64_t rows = T;
  if (logit_rows >= 0) {
    const int64_t* out_rows = batch_.out_rows.data();
    cpu::paged_attention(pool, att_chunks_, row_chunk, out_rows, logit_rows, qkv, qkv_w, num_heads_, how, attn,
                         q_dim_);
    for (int64_t i = 0; i < logit_rows; ++i)
      if (out_rows[i] != i) std::memcpy(x + i * H, x + out_rows[i] * H, sizeof(float) * H);
    rows = logit_rows;
  } else {
    cpu::paged_attention(pool, att_chunks_, row_chunk, nullptr, T, qkv, qkv_w, num_heads_, how, attn, q_dim_);
  }
  add_projection(lw.o, lw.post_attn_norm, attn, rows, x, {l, LoraTarget::o, lora_row_slots(logit_rows >= 0)});
}

void DecoderModel::add_projection(const Linear& l, const Norm& post_norm, const float* in, int64_t rows, float* x,
                                  const LoraRows& lora) {
  if (post_norm.w.empty()) {
    linear_row_parallel(l, in, rows, x, lora);
    return;
  }
  // Gemma 2: the projection's whole sum (all-reduced over tp) is normed before it joins the residual.
  const int64_t H = config_.hidden_size;
  float* y = grow(proj_, rows * H);
  linear(l, in, rows, y, false);
  add_lora(lora, in, l.in, rows, y, H);
  if (tp_.size() > 1) all_reduce_tp(y, static_cast<size_t>(rows * H));
  float* yn = grow(proj_norm_, rows * H);
  norm(post_norm, y, yn, rows);
  for (int64_t i = 0; i < rows * H; ++i) x[i] += yn[i];
}

void DecoderModel::mlp_block(int32_t l, float* x, int64_t rows, bool logit_rows_only) {
  const DecoderLayerWeights& lw = w_.layers[l];
  if (!lw.moe.empty()) {
    moe_block(lw, x, rows);
    return;
  }
  const int64_t inter = inter_;
  float* xn = grow(xn_, rows * config_.hidden_size);
  float* mlp = grow(mlp_, rows * (spec_.gated_mlp ? 2 * inter : inter));
  float* mlp_act = spec_.gated_mlp ? grow(mlp_act_, rows * inter) : mlp;
  norm(lw.mlp_norm, x, xn, rows);
  linear(lw.up, xn, rows, mlp, false);
  const int32_t* slots = lora_row_slots(logit_rows_only);
  add_lora({l, LoraTarget::up, slots}, xn, config_.hidden_size, rows, mlp, lw.up.out);
  if (spec_.gated_mlp)
    cpu::gated_activate(mlp, mlp_act, rows, inter, spec_.act);
  else
    cpu::activate(mlp, rows * inter, spec_.act);
  add_projection(lw.down, lw.post_mlp_norm, mlp_act, rows, x, {l, LoraTarget::down, slots});
}

void DecoderModel::pass_to_next_stage(const float* x, int64_t T, int64_t R, int32_t tag_act, int32_t tag_logits,
                                      ForwardOutput& out, PendingTransfer& logits) {
  const int64_t H = config_.hidden_size, V = config_.vocab_size;
  if (layout_.leader()) {
    out.logits.resize(static_cast<size_t>(R * V));
    logits = pp_.post_recv(out.logits.data(), out.logits.size() * sizeof(float), pp_.size() - 1, tag_logits);
  } else {
    out.logits.clear();
  }
  // Every tp rank hands its (identical) activations to the same tp rank of the next stage.
  const size_t bytes = static_cast<size_t>(T * H) * sizeof(float);
  timed_comm(bytes, [&] { pp_.send(x, bytes, pp_.rank() + 1, tag_act); });
}

}  // namespace engine
