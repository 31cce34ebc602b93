// One iteration on the GPU: the batch's rows (model/batch-layout.h) and metadata (batch-meta.h), then every layer
// of this stage enqueued on the stream, then the LM head (cuda-decoder-logits.cpp) or, for a decode batch, a CUDA
// graph of all of it (cuda-decoder-graphs.cpp), on one GPU or every rank of a tp / pp grid.
#include "cuda/cuda-decoder.h"

#include <algorithm>
#include <utility>

#include "model/model-checks.h"
#include "model/prompt-table.h"

namespace engine::cuda {

void CudaDecoder::forward(const std::vector<SequenceChunk>& chunks, ForwardOutput& out) {
  if (!passes_.empty()) throw EngineError(ErrorCode::internal, "forward() while pipelined passes are in flight");
  validate_chunks(chunks, config_, !spec_.rope, num_blocks_, tokens_per_block_, /*prompt_tables=*/true);
  use_device();
  comm_stats_ = {};
  sampler_.clear();
  layout_batch(chunks, samples_on_device(), config_.vocab_size, batch_, out);
  // Only the leader samples, so only it gets host rows; a device-sampled chunk has none.
  if (layout_.leader())
    out.logits.resize(static_cast<size_t>(batch_.num_host_rows) * static_cast<size_t>(config_.vocab_size));
  else
    out.logits.clear();
  if (batch_.num_tokens == 0) return;
  run_whole(chunks, out);
}

void CudaDecoder::run_whole(const std::vector<SequenceChunk>& chunks, ForwardOutput& out) {
  const int64_t T = batch_.num_tokens, R = batch_.num_out_rows();
  if (T > cap_tokens_) reserve(T, cap_logit_rows_);
  plan_lora(chunks);

  const bool virtual_tokens = stage_virtual_rows(chunks);
  const bool graph = !virtual_tokens && use_graph(chunks);
  const BatchMeta meta = upload_meta(chunks, graph);
  if (graph) {
    run_graph(meta, chunks, out);
    return;
  }
  enqueue_layers(meta, T, R, meta.max_ctx);
  if (layout_.last_stage() || layout_.leader()) {
    // The LM head in slices of the reserved logits rows, each sampled / copied out before the next.
    for (int64_t r0 = 0; r0 < R; r0 += cap_logit_rows_)
      lm_head_rows(xn_.get(), r0, std::min(cap_logit_rows_, R - r0), chunks, out);
  }
  wait_stream();
}

void CudaDecoder::wait_stream() {
  before_device_wait();
  check_cuda(cudaStreamSynchronize(stream_), "forward");
}

bool CudaDecoder::stage_virtual_rows(const std::vector<SequenceChunk>& chunks) {
  virtual_rows_.clear();
  virtual_stage_.clear();
  const int64_t H = config_.hidden_size;
  bool any = false;
  int64_t row = 0;
  for (const SequenceChunk& ch : chunks) {
    if (!ch.prompt_table) {  // (every chunk of a batch without p-tuning: nothing to look at)
      row += static_cast<int64_t>(ch.tokens.size());
      continue;
    }
    for (int32_t t : ch.tokens) {
      if (const float* src = prompt_table_row(ch.prompt_table.get(), t, config_.vocab_size)) {
        any = true;
        if (layout_.first_stage()) {  // (the only stage that embeds)
          virtual_rows_.push_back(row);
          for (int64_t i = 0; i < H; ++i) virtual_stage_.push_back(src[i] * config_.embed_scale);
        }
      }
      ++row;
    }
  }
  return any;
}

bool CudaDecoder::use_graph(const std::vector<SequenceChunk>& chunks) const {
  // One launch instead of ~10 per layer (and, under tp, the all-reduces' launches too); a graph's shapes depend on
  // the batch size alone, so only decode batches (one token, last-row logits) qualify.
  const int64_t T = batch_.num_tokens;
  bool graph = graphs_enabled_ && batch_.num_out_rows() == T &&
               T <= cap_logit_rows_ && batch_.num_table_entries <= kGraphTableEntries;
  for (const SequenceChunk& ch : chunks) graph = graph && ch.tokens.size() == 1 && !ch.all_logits;
  return graph;
}

BatchMeta CudaDecoder::upload_meta(const std::vector<SequenceChunk>& chunks, bool graph) {
  const MetaLayout ml =
      meta_layout(batch_.num_tokens, batch_.num_out_rows(), graph ? kGraphTableEntries : batch_.num_table_entries);
  // The step's LoRA rows ride in the same block, after the batch's arrays (one copy either way).
  const size_t total = ml.total + (lora_step_ ? lora_meta_bytes() : 0);
  meta_host_.ensure(total);
  if (total > meta_dev_.bytes()) {
    meta_dev_.ensure(total);
    drop_graphs();  // captured graphs read the old buffer
  }
  MetaGeometry g;
  g.tokens_per_block = tokens_per_block_;
  g.block_elems = block_elems_;
  g.head_dim = config_.head_dim;
  g.rows_per_group = attention_rows_per_group(num_heads_, num_kv_heads_, config_.head_dim);
  g.rows_per_wide_group = attention_prefill_rows_per_group(num_heads_, num_kv_heads_, config_.head_dim);
  if (spec_.rope && config_.rope_scaling.longrope())
    g.long_after = config_.rope_scaling.original_max_position_embeddings;
  const BatchMeta m = fill_batch_meta(chunks, batch_, ml, g, meta_host_.as<char>(), meta_dev_.as<char>());
  if (lora_step_) fill_lora_meta(meta_host_.as<char>() + ml.total, meta_dev_.as<char>() + ml.total, graph);
  check_cuda(cudaMemcpyAsync(meta_dev_.get(), meta_host_.get(), total, cudaMemcpyHostToDevice, stream_),
             "upload metadata");
  return m;
}

void CudaDecoder::enqueue_layers(const BatchMeta& m, int64_t T, int64_t R, int32_t max_ctx, bool hand_on) {
  const int64_t H = config_.hidden_size, V = config_.vocab_size;
  float* x = x_.as<float>();
  if (layout_.first_stage()) {
    embed(m.tokens, T, embed_.get(), dt_, layout_.vocab_begin, layout_.local_real_vocab(V), H, config_.embed_scale, x,
          stream_);
    // Vocab parallel: each token's row came from the one tp rank owning its id, the others gave zeros.
    all_reduce(x, static_cast<size_t>(T * H));
    // A virtual token's id is past every rank's vocabulary, so its row is zeros so far: every rank writes its table
    // row (virtual_stage_ lives until the next forward, past these copies).
    for (size_t i = 0; i < virtual_rows_.size(); ++i)
      check_cuda(cudaMemcpyAsync(x + virtual_rows_[i] * H, virtual_stage_.data() + static_cast<int64_t>(i) * H,
                                 sizeof(float) * static_cast<size_t>(H), cudaMemcpyHostToDevice, stream_),
                 "copy a p-tuning table row");
    if (!spec_.rope) add_position_embedding(x, m.positions, T, pos_embed_.get(), dt_, H, stream_);
  } else if (transfers_) {
    pp_dev_->recv(x, static_cast<size_t>(T * H) * 4, pp_.rank() - 1, stream_);
    comm_stats_.bytes += static_cast<uint64_t>(T * H) * 4;
    ++comm_stats_.calls;
  } else {
    check_cuda(cudaMemsetAsync(x, 0, static_cast<size_t>(T * H) * 4, stream_), "warm-up rows");
  }
  for (int32_t l = 0; l < num_layers_; ++l) {
    // Past the model's last attention only rows that produce logits matter (K/V of every token are written by
    // then): the last layer's projection and MLP run on those rows alone, gathered into x2_, which x then names.
    const bool last = layout_.last_stage() && l == num_layers_ - 1;
    attention_layer(l, m, x, T, R, max_ctx, last);
    if (last) x = x2_.as<float>();
    mlp_layer(l, x, last ? R : T, last);
  }
  if (!layout_.last_stage()) {
    if (!hand_on || !transfers_) return;
    // Every tp rank hands its (identical) activations to the same tp rank of the next stage.
    pp_dev_->send(x, static_cast<size_t>(T * H) * 4, pp_.rank() + 1, stream_);
    comm_stats_.bytes += static_cast<uint64_t>(T * H) * 4;
    ++comm_stats_.calls;
  } else {
    norm(x, xn_.get(), dt_, R, H, final_norm_.w.as<float>(), final_norm_.bias(), config_.norm_eps, stream_);
  }
}

void CudaDecoder::attention_layer(int32_t l, const BatchMeta& m, float* x, int64_t T, int64_t R, int32_t max_ctx,
                                  bool last) {
  const DLayer& lw = layers_[l];
  const int32_t hd = config_.head_dim;
  const size_t es = kv_element_bytes();
  const KvFormat kv = kv_format(l);
  const size_t layer_elems = static_cast<size_t>(num_blocks_) * static_cast<size_t>(block_elems_);
  char* k_pool = kv_.as<char>() + static_cast<size_t>(2 * l) * layer_elems * es;
  char* v_pool = k_pool + layer_elems * es;
  float* qkv = qkv_.as<float>();
  void* attn = attn_.get();
  const int64_t qkv_w = q_dim_ + 2 * kv_dim_;

  // Qwen3 normalises q / k heads after the bias and before rope: the bias goes in there, not in attention().
  const bool qk_normed = !lw.q_norm.w.empty();
  // The LoRA deltas of a decode-sized step go in with the bias, where the keys and values are written and q rotated
  // (rope_and_write_kv, or attention's own kernel): no pass of their own over the rows (qkv_delta stays empty in
  // other steps, and with Qwen3's norms, which come first).
  const LoraAt lora_qkv{l, LoraTarget::qkv, false};
  RowDelta qkv_delta;
  norm_linear(lw.attn_norm, x, T, lw.qkv, qkv, true, &lora_qkv, qk_normed ? nullptr : &qkv_delta);
  if (qk_normed)
    qk_norm(qkv, T, qkv_w, lw.qkv.bias(), num_heads_, num_kv_heads_, hd, lw.q_norm.w.as<float>(),
            lw.k_norm.w.as<float>(), config_.norm_eps, stream_);
  // attention() rotates q / k and writes this step's keys and values (in its kernel for small decode batches).
  const float* inv_freq = spec_.rope ? inv_freq_.as<float>() : nullptr;
  const NewKv fresh{T, qk_normed ? nullptr : lw.qkv.bias(), m.positions, inv_freq, m.kv_dst, m.use_long, qkv_delta};
  if (!fuse_kv_)
    rope_and_write_kv(qkv, T, qkv_w, fresh.bias, num_heads_, num_kv_heads_, hd, m.positions, fresh.inv_freq,
                      fresh.use_long, k_pool, v_pool, dt_, kv, m.kv_dst, tokens_per_block_, stream_, fresh.delta);
  AttnArgs a{};
  if (fuse_kv_) a.fresh = fresh;
  a.q = qkv;
  a.q_stride = qkv_w;
  a.k_pool = k_pool;
  a.v_pool = v_pool;
  a.dt = dt_;
  a.kv = kv;
  a.block_tables = m.tables;
  a.n_heads = num_heads_;
  a.n_kv = num_kv_heads_;
  a.head_dim = hd;
  a.tokens_per_block = tokens_per_block_;
  a.scale = attention_scale(config_);  // decoder.h: the CPU decoder's (query_scale, longrope's factor)
  a.softcap = config_.attn_softcap;
  a.window = config_.window_of(layout_.layer_begin + l);  // (rows carry their sequences' caps)
  a.out = attn;
  a.out_stride = q_dim_;
  a.max_ctx = max_ctx;
  a.new_last_only = m.one_token_each;
  a.rows = last ? m.rows_last : m.rows_all;
  a.n_rows = static_cast<int32_t>(last ? R : T);
  a.groups = last ? m.groups_last : m.groups_all;
  a.n_groups = last ? m.n_groups_last : m.n_groups_all;
  if (!last && m.n_groups_wide > 0) {  // (the last layer's logit rows are one a prompt: the general kernel)
    a.wide_groups = m.groups_wide;
    a.n_wide_groups = m.n_groups_wide;
  }
  attention(a, attn_ws_.as<float>(), num_sms_, stream_);
  const LoraAt lora_o{l, LoraTarget::o, last};
  if (last) {
    float* x2 = x2_.as<float>();
    gather_rows(x, m.out_rows, x2, R, config_.hidden_size, stream_);
    add_projection(lw.o, lw.post_attn_norm, attn, R, x2, false, &lora_o);
  } else {
    add_projection(lw.o, lw.post_attn_norm, attn, T, x, false, &lora_o);
  }
}

void CudaDecoder::mlp_layer(int32_t l, float* x, int64_t rows, bool logit_rows) {
  const DLayer& lw = layers_[l];
  if (lw.moe.on()) {
    moe_layer(l, x, rows);  // (experts take no LoRA: check_lora_adapter refuses MLP modules of such layers)
    return;
  }
  void* mlp = mlp_.get();
  void* mlp_act = spec_.gated_mlp ? mlp_act_.get() : mlp;
  const LoraAt lora_up{l, LoraTarget::up, logit_rows}, lora_down{l, LoraTarget::down, logit_rows};
  // The plain gated activation adds the gate | up LoRA deltas of a decode-sized step as it reads the product: one
  // read-modify-write pass over the widest product fewer (up_delta stays empty in other steps).
  const bool fp8_down = lw.down.fp8.on() && fuse_quant_;
  RowDelta up_delta;
  norm_linear(lw.mlp_norm, x, rows, lw.up, mlp, false, &lora_up, spec_.gated_mlp && !fp8_down ? &up_delta : nullptr);
  Fp8ActOut plan;
  if (spec_.gated_mlp && fp8_down &&
      gemm_->fp8_activation_plan(rows, lw.down.out, lw.down.in, lw.down.fp8.view(), plan)) {
    // (mlp_act still gets the 16-bit activations, which the down projection's LoRA shrink reads)
    gated_activation_e4m3(mlp, mlp_act, dt_, rows, inter_, act_, lw.up.bias(), plan, stream_);
    add_projection(lw.down, lw.post_mlp_norm, mlp_act, rows, x, true, &lora_down);
    return;
  }
  if (spec_.gated_mlp)
    gated_activation(mlp, mlp_act, dt_, rows, inter_, act_, lw.up.bias(), stream_, up_delta);
  else
    activation(mlp, dt_, rows, inter_, act_, lw.up.bias(), stream_);
  add_projection(lw.down, lw.post_mlp_norm, mlp_act, rows, x, false, &lora_down);
}

void CudaDecoder::linear(const DLinear& l, const void* x, int64_t rows, void* y, bool y_f32, bool accumulate,
                         bool x_quantized) {
  if (l.fp8.on())
    gemm_->xwt_fp8(rows, l.out, l.in, x, l.fp8.view(), dt_, y, y_f32, l.out, accumulate, x_quantized);
  else
    gemm_->xwt(rows, l.out, l.in, x, l.w.get(), dt_, y, y_f32, l.out, accumulate);
}

void CudaDecoder::norm_linear(const DNorm& n, const float* x, int64_t rows, const DLinear& l, void* y, bool y_f32,
                              const LoraAt* lora, RowDelta* defer) {
  const int64_t H = config_.hidden_size;
  // An RMSNorm's LoRA shrink reads the residual rows and normalises them itself (as the fused GEMV does), so it
  // starts at once, beside the norm and product, whichever path they take; a LayerNorm's reads xn_ after the norm.
  // (A stacked step's products read the normalised rows, as the base product: lora_stacked.)
  const bool rms = n.bias() == nullptr, early = rms && !lora_stack_step_;
  if (early) lora_begin(lora, x, n.w.as<float>(), H, H, l.out, defer != nullptr);
  if (fuse_norm_ && early) {
    const float* g = n.w.as<float>();
    const float eps = config_.norm_eps;
    if (l.fp8.on() ? gemm_->xwt_fp8_rms(rows, l.out, l.in, x, g, eps, l.fp8.view(), dt_, y, y_f32, l.out)
                   : gemm_->xwt_rms(rows, l.out, l.in, x, g, eps, l.w.get(), dt_, y, y_f32, l.out)) {
      lora_end(lora, y, y_f32, l.out, l.out, defer);
      return;
    }
  }
  Fp8ActOut plan;
  if (l.fp8.on() && fuse_quant_ && gemm_->fp8_activation_plan(rows, l.out, l.in, l.fp8.view(), plan)) {
    norm_e4m3(x, xn_.get(), dt_, rows, H, n.w.as<float>(), n.bias(), config_.norm_eps, plan, stream_);
    if (!early) lora_begin(lora, xn_.get(), nullptr, H, H, l.out, defer != nullptr);  // (xn_ has 16-bit rows too)
    linear(l, xn_.get(), rows, y, y_f32, false, true);
    lora_end(lora, y, y_f32, l.out, l.out, defer);
    return;
  }
  norm(x, xn_.get(), dt_, rows, H, n.w.as<float>(), n.bias(), config_.norm_eps, stream_);
  if (!early) lora_begin(lora, xn_.get(), nullptr, H, H, l.out, defer != nullptr);
  linear(l, xn_.get(), rows, y, y_f32, false);
  lora_end(lora, y, y_f32, l.out, l.out, defer);
}

void CudaDecoder::all_reduce(float* x, size_t n) {
  if (tp_.size() == 1 || !transfers_) return;
  tp_dev_->all_reduce_sum(x, n, stream_);
  comm_stats_.bytes += n * sizeof(float);
  ++comm_stats_.calls;
}

void CudaDecoder::row_parallel(const DLinear& l, const void* x, int64_t rows, float* y, bool x_quantized,
                               const LoraAt* lora) {
  // The residual stream y is the same on every tp rank: rank 0 adds its partial product (and the bias) onto it,
  // the others overwrite it with theirs, so one all-reduce yields y + Σ partials + bias (+ Σ LoRA partials).
  const bool rank0 = tp_.rank() == 0;
  lora_begin(lora, x, nullptr, l.in, l.in, l.out);
  linear(l, x, rows, y, true, rank0, x_quantized);
  lora_end(lora, y, true, l.out, l.out);
  if (l.bias() != nullptr) add_bias(y, l.bias(), rows, l.out, stream_);
  all_reduce(y, static_cast<size_t>(rows * l.out));
}

void CudaDecoder::add_projection(const DLinear& l, const DNorm& post_norm, const void* x, int64_t rows, float* y,
                                 bool x_quantized, const LoraAt* lora) {
  if (post_norm.w.empty()) {
    row_parallel(l, x, rows, y, x_quantized, lora);
    return;
  }
  // The norm is of the whole product, so the tp ranks' partial products are summed in a buffer of their own
  // before it, not on the residual.
  float* p = proj_.as<float>();
  lora_begin(lora, x, nullptr, l.in, l.in, l.out);
  linear(l, x, rows, p, true, false, x_quantized);
  lora_end(lora, p, true, l.out, l.out);
  if (l.bias() != nullptr) add_bias(p, l.bias(), rows, l.out, stream_);
  all_reduce(p, static_cast<size_t>(rows * l.out));
  add_norm(p, y, rows, l.out, post_norm.w.as<float>(), post_norm.bias(), config_.norm_eps, stream_);
}

}  // namespace engine::cuda
