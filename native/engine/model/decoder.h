// The decoder-only transformer both supported families reduce to: embeddings (+ learned positions for GPT-2),
// per layer [norm -> fused qkv -> (rope) -> paged attention -> out proj + residual -> norm -> MLP + residual],
// final norm, LM head. llama.cpp and gpt2.cpp only map checkpoint tensors into these weights, so the batched,
// paged forward pass exists once.
//
// Tensor/pipeline parallel (parallel-layout.h): a rank holds its stage's layers, and within them its heads' q/k/v
// rows and MLP columns (column parallel), the matching columns of o/down (row parallel: partial sums, added up by
// one all-reduce per block), and its vocab rows of the embedding / LM head. Shapes below are per rank; with
// tp = pp = 1 they are the whole model.
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "comm/comm.h"
#include "cpu/activation.h"
#include "cpu/attention.h"
#include "lora/lora-apply-cpu.h"
#include "model/batch-layout.h"
#include "model/model.h"
#include "model/moe-routing.h"
#include "quant/fp8-matrix.h"
#include "parallel/parallel-layout.h"

namespace engine {

// A projection in nn.Linear layout.
struct Linear {
  std::vector<float> w;  // [out, in]
  std::vector<float> b;  // [out], empty without bias
  int64_t out = 0, in = 0;
  // Set when the weight is FP8 (an FP8 checkpoint or --quantization fp8): `w` then holds exactly its dequantized
  // values, which the CPU backend runs; FP8 backends upload this instead.
  Fp8Matrix fp8;
};

struct Norm {
  std::vector<float> w;  // [hidden]
  std::vector<float> b;  // [hidden] for LayerNorm, empty for RMSNorm
};

// A mixture-of-experts MLP (model-config.h's MoeConfig) as this rank holds it (parallel-layout.h): the whole
// router, its experts' gate|up rows and down columns, its columns of the shared expert.
struct ExpertWeights {
  Linear up;    // [2 * cols, hidden]: gate rows then up rows
  Linear down;  // [hidden, cols]
};
struct MoeWeights {
  Linear router;                       // [num_experts, hidden], whole on every rank (all route alike)
  std::vector<ExpertWeights> experts;  // experts [expert_begin, expert_end)
  ExpertWeights shared;                // Qwen2-MoE's shared expert, tp-split like a dense MLP; empty: none
  Linear shared_gate;                  // [1, hidden], whole
  bool empty() const { return experts.empty(); }
};

// q_dim / kv_dim / inter: this rank's local heads * head_dim, local kv heads * head_dim, intermediate / tp.
// Row-parallel biases (o, down) are held by tp rank 0 only, so the all-reduce adds them once.
struct DecoderLayerWeights {
  Norm attn_norm;
  // EAGLE-3's layer: the norm of the hidden input, beside attn_norm's of the token's embedding; q/k/v then read
  // [attn_norm(embedding); hidden_norm(x)] ([.., 2 * hidden]) and the residual is x. Empty: none.
  Norm hidden_norm;
  Linear qkv;   // [q_dim + 2 * kv_dim, hidden]: q rows, then k, then v (one GEMM for all three)
  Norm q_norm, k_norm;  // [head_dim], applied to every query / key head before rope (Qwen3); empty: none
  Linear o;     // [hidden, q_dim]
  Norm post_attn_norm;  // Gemma 2 (sandwich_norms): on the attention output before the residual add; empty: none
  Norm mlp_norm;        // the MLP's input norm (Gemma 2: pre_feedforward_layernorm)
  Norm post_mlp_norm;   // Gemma 2: on the MLP output before the residual add; empty: none
  Linear up;    // gated: [2 * inter, hidden] gate rows then up rows; else [inter, hidden]
  Linear down;  // [hidden, inter]
  MoeWeights moe;  // a mixture-of-experts layer: its MLP (up / down are then empty)
};

// vocab_local: the rank's slice of the vocab padded to a multiple of tp (ParallelLayout::local_vocab); padding
// rows are zero. Stage-only parts are empty on the other stages.
struct DecoderWeights {
  std::vector<float> embed;      // [vocab_local, hidden]; first stage only
  std::vector<float> pos_embed;  // [max_positions, hidden]; first stage only; empty when positions come from rope
  std::vector<DecoderLayerWeights> layers;  // this stage's layers, in order
  Norm final_norm;               // last stage only; empty weight: none (an EAGLE draft)
  std::vector<float> lm_head;    // [vocab_local, hidden]; last stage only; empty: tied to embed (pp == 1)
  // An EAGLE draft (eagle/eagle-checkpoint.h): the layers' input is fc([embedding; feature]) of each token; empty:
  // the embedding alone. EAGLE-3 (layers[0].hidden_norm set): fc([aux_0; aux_1; aux_2]) of the model's residual
  // streams entering `fc_layers`, or a guess's feature as it is.
  Linear fc;                     // [hidden, 2 * hidden]; EAGLE-3: [hidden, fc_layers.size() * hidden]
  std::vector<int32_t> fc_layers;  // EAGLE-3: the model's layers fc reads (Model::feature_layers)
  // EAGLE-3's LM head over its own vocabulary: row i's target token id (d2t applied); the logits of the other ids
  // are -inf. Empty: row i is token i.
  std::vector<int32_t> lm_head_ids;  // [lm_head rows]
};

struct DecoderSpec {
  bool rms_norm = true;     // false: LayerNorm with bias
  bool rope = true;         // false: learned position embeddings
  bool gated_mlp = true;    // act(gate) * up, else act(up)
  cpu::Activation act = cpu::Activation::silu;
};

// The attention score scale: query_scale (or 1 / sqrt(head_dim)), times longrope's attention_factor squared.
float attention_scale(const ModelConfig& c);
// x = cap * tanh(x / cap) in place (nothing when cap <= 0): Gemma 2's final logit soft-capping.
void soft_cap(float* x, size_t n, float cap);

class DecoderModel : public Model {
 public:
  DecoderModel(ModelConfig config, DecoderSpec spec, DecoderWeights weights, int32_t num_threads);
  // One rank of a tp x pp grid: `weights` hold the slices `layout` names; tp_comm / pp_comm as in LoadOptions.
  DecoderModel(ModelConfig config, DecoderSpec spec, DecoderWeights weights, int32_t num_threads,
               ParallelLayout layout, Comm tp_comm, Comm pp_comm);

  const ModelConfig& config() const override { return config_; }
  size_t kv_bytes_per_token() const override;
  void allocate_kv(int32_t num_blocks, int32_t tokens_per_block) override;
  void copy_kv_block(int32_t src, int32_t dst) override;
  size_t weight_bytes() const override;
  void forward(const std::vector<SequenceChunk>& chunks, ForwardOutput& out) override;
  ForwardCommStats last_comm_stats() const override { return comm_stats_; }
  // The leader of a pipeline (pp > 1) keeps one micro-batch in flight per stage (model.h).
  int32_t pipeline_depth() const override;
  void forward_begin(const std::vector<SequenceChunk>& chunks) override;
  void forward_end(ForwardOutput& out) override;
  std::string kv_cache_dtype() const override;
  // FP8 (e4m3) K/V from now on, with one K and one V scale per local layer (empty: 1 for every layer; scales_from
  // says where they came from, for kv_cache_dtype()). Before allocate_kv.
  void use_fp8_kv(std::vector<float> k_scales, std::vector<float> v_scales, std::string scales_from);
  bool supports_lora() const override { return true; }
  void load_lora(int32_t slot, const LoraAdapter& adapter) override;
  void unload_lora(int32_t slot) override;
  void set_medusa_heads(std::shared_ptr<const MedusaHeads> heads) override;
  bool supports_token_trees() const override;  // token_trees_fit (model-checks.h)
  bool supports_prompt_tables() const override { return true; }  // embed() takes virtual tokens' rows
  int32_t medusa_heads() const override { return medusa_ ? medusa_->num_heads() : 0; }
  int32_t head_guess_source() const override {
    return layout_.last_stage() ? -1 : (pp_.size() - 1) * tp_.size();  // (world rank = pp_rank * tp + tp_rank)
  }
  bool serves_head_guesses() const override { return pp_.size() > 1 && layout_.last_stage() && tp_.rank() == 0; }
  void head_guesses(const std::vector<int32_t>& rows, std::vector<int32_t>& out) override;
  void keep_final_hidden(const std::vector<int32_t>& aux_layers) override;
  const float* final_hidden(int64_t& rows) const override;
  bool takes_features() const override { return !w_.fc.w.empty(); }
  std::vector<int32_t> feature_layers() const override { return w_.fc_layers; }
  void set_input_features(const float* rows, int64_t width) override {
    input_features_ = rows;
    input_width_ = width;
  }

 private:
  void validate(const std::vector<SequenceChunk>& chunks) const;
  void norm(const Norm& n, const float* x, float* out, int64_t rows) const;
  // y = x Wᵀ + b (accumulate: y += x Wᵀ + b)
  void linear(const Linear& l, const float* x, int64_t rows, float* y, bool accumulate) const;
  // A projection's LoRA deltas for the rows it computes (lora/lora-apply-cpu.h): layer, target and each row's slot.
  struct LoraRows {
    int32_t layer = 0;
    LoraTarget target = LoraTarget::qkv;
    const int32_t* row_slot = nullptr;  // null: no LoRA
  };
  // y += x Wᵀ + b summed over the tp group, for a row-parallel projection whose partial products must be added
  // (and its LoRA deltas, partial sums too, added before the sum).
  void linear_row_parallel(const Linear& l, const float* x, int64_t rows, float* y, const LoraRows& lora);
  void add_lora(const LoraRows& lora, const float* x, int64_t ldx, int64_t rows, float* y, int64_t ldy);
  // Each row's slot for the rows a layer computes: all T token rows, or the last layer's R logit rows.
  const int32_t* lora_row_slots(bool logit_rows_only) const;
  void embed(const std::vector<SequenceChunk>& chunks, const int32_t* positions, float* x);
  // An EAGLE draft: x[T, hidden] (the tokens' embeddings) becomes fc([embedding; feature]) of each row; EAGLE-3's,
  // fc(feature) or the feature itself (a guess's), with the embeddings kept in eagle_embed_ for its layer.
  void mix_features(float* x, int64_t T);
  // EAGLE-3's layer input: [attn_norm(embedding); hidden_norm(x)] of the T rows, [T, 2 * hidden].
  const float* eagle3_layer_input(const DecoderLayerWeights& lw, const float* x, int64_t T);
  // The model an EAGLE-3 draft reads: x's rows that will produce logits (all T rows, `compacted`: the first R) as
  // the residual stream entering `layer` (num_layers: after the last), into each aux_hidden_ slot it fills.
  void keep_aux_rows(int32_t layer, const float* x, int64_t R, bool compacted);
  bool eagle3_draft() const { return !w_.layers.empty() && !w_.layers[0].hidden_norm.w.empty(); }
  void lm_head(const float* xn, int64_t rows, ForwardOutput& out);
  // The stage's layers over the T token rows of x ([T, hidden], updated in place); the model's last layer leaves
  // only the R logit rows in x's first R rows.
  void run_layers(float* x, int64_t T, int64_t R);
  // Layer l's norm -> qkv -> rope -> K/V write -> attention -> out projection + residual. logit_rows >= 0 (the
  // model's last layer): attention and the projection run only for the logit rows, gathered to x's first rows.
  void attention_block(int32_t l, float* x, int64_t T, int64_t logit_rows, const float* cos_t, const float* sin_t);
  void mlp_block(int32_t l, float* x, int64_t rows, bool logit_rows_only);  // norm -> MLP + residual
  // x += l(in), or x += post_norm(l(in)) when post_norm has weights (Gemma 2); row parallel over tp either way.
  void add_projection(const Linear& l, const Norm& post_norm, const float* in, int64_t rows, float* x,
                      const LoraRows& lora);
  // norm -> router -> the chosen experts (+ shared expert) -> weighted sum + residual (decoder-moe.cpp): the rank's
  // experts' partial sums are added up by the one all-reduce a dense MLP's down projection takes.
  void moe_block(const DecoderLayerWeights& lw, float* x, int64_t rows);
  // out[rows, hidden] (+)= down(act(gate) * up) of the rows of xn listed in `rows_of` (all rows when empty),
  // each scaled by its weight.
  void expert_mlp(const ExpertWeights& e, const float* xn, const std::vector<int32_t>& rows_of,
                  const std::vector<float>& weights, float* out);
  // forward() but for the leader's wait for the last stage's logits: `logits` is left posted (forward() waits for
  // it at once; forward_begin keeps it until forward_end).
  void run_stage(const std::vector<SequenceChunk>& chunks, ForwardOutput& out, PendingTransfer& logits);
  // A stage before the last: activations to the next stage. The leader first posts the receive of the logits the
  // last stage will send back, so that stage's send never waits on the leader's next send of activations.
  void pass_to_next_stage(const float* x, int64_t T, int64_t R, int32_t tag_act, int32_t tag_logits,
                          ForwardOutput& out, PendingTransfer& logits);
  // Sums x[n] over the tp group in place (timed).
  void all_reduce_tp(float* x, size_t n);
  // Runs `fn` (one comm call moving `bytes`) and adds its time to comm_stats_.
  template <typename Fn>
  void timed_comm(size_t bytes, Fn fn);

  ModelConfig config_;
  DecoderSpec spec_;
  DecoderWeights w_;
  int32_t num_threads_;
  std::thread::id threads_set_for_;  // OpenMP's thread count is per calling thread
  std::vector<float> inv_freq_;      // [head_dim / 2]
  std::vector<float> inv_freq_long_; // [head_dim / 2], longrope only
  std::vector<uint8_t> use_long_;    // [n_tokens]: the token rotates by inv_freq_long_
  int64_t q_dim_, kv_dim_;  // this rank's: local heads * head_dim, local kv heads * head_dim
  int32_t num_heads_, num_kv_heads_, num_layers_;  // this rank's
  int64_t inter_;                                  // this rank's intermediate columns

  ParallelLayout layout_;
  Comm tp_, pp_;
  ForwardCommStats comm_stats_;
  uint32_t iteration_ = 0;  // forward() calls so far: pipeline messages are tagged with it
  // Passes begun by forward_begin and not yet ended, oldest first (a deque: a posted receive's buffer never moves).
  struct PendingPass {
    ForwardOutput out;
    PendingTransfer logits;
    ForwardCommStats comm;
  };
  std::deque<PendingPass> pending_;
  // Last stage: logits on their way to the leader, oldest first, each with its own copy (a deque: none moves).
  struct LogitsSend {
    std::vector<float> data;
    PendingTransfer send;
  };
  std::deque<LogitsSend> logits_sends_;

  // KV pool: one K and one V array per layer, [num_blocks, num_kv_heads, tokens_per_block, head_dim] each.
  // Elements are floats, or e4m3 bytes after use_fp8_kv.
  int32_t num_blocks_ = 0, tokens_per_block_ = 0;
  std::vector<std::unique_ptr<uint8_t[]>> k_pool_, v_pool_;
  cpu::KvStorage kv_storage_ = cpu::KvStorage::f32;
  std::vector<float> k_scales_, v_scales_;  // [local layers], e4m3 only
  std::string kv_scales_from_;

  // Scratch, grown to the largest iteration seen and reused: forward() allocates nothing in steady state.
  BatchLayout batch_;
  std::vector<float> x_, xn_, qkv_, attn_, mlp_, mlp_act_, cos_, sin_;  // [n_tokens, ...]
  std::vector<float> proj_, proj_norm_;                                 // Gemma 2's normed projections
  std::vector<float> logits_local_, logits_gathered_;                   // [n_logit_rows, vocab_local], [tp, ...]
  std::vector<cpu::AttentionChunk> att_chunks_;
  std::vector<float> moe_out_, router_logits_, shared_weights_, expert_x_, expert_h_, expert_act_, expert_y_;
  std::vector<ExpertRoute> routes_;  // [local experts]

  // LoRA: the adapters in their slots, and this forward's slot per token row [T] and per logit row [R] (empty
  // when no chunk names a slot).
  CpuLoraSlots lora_;
  std::vector<int32_t> row_slot_, out_row_slot_;

  // Medusa heads (the driving rank only) and their scratch.
  std::shared_ptr<const MedusaHeads> medusa_;
  std::vector<uint64_t> tree_visible_;  // [T] each tree token's visible chunk tokens (cpu::AttentionChunk)
  std::vector<uint64_t> tree_bits_;     // scratch: one tree's bits, its nodes in the past too
  std::vector<float> medusa_scratch_;
  std::vector<float> final_hidden_, medusa_rows_;  // [logit rows, hidden]: the last forward's; the rows asked
  bool keep_hidden_ = false;  // final_hidden_ kept for Medusa or EAGLE heads
  // EAGLE-3 heads read these layers' residual streams (keep_final_hidden): the last forward's logit rows of each,
  // side by side, [logit rows, aux_layers_.size() * hidden]; final_hidden() returns them.
  std::vector<int32_t> aux_layers_;
  std::vector<float> aux_hidden_;
  const float* input_features_ = nullptr;  // an EAGLE draft's for the next forward (set_input_features)
  int64_t input_width_ = 0;                // floats per row of input_features_
  std::vector<float> fc_in_;  // [n_tokens, 2 * hidden]: [embedding; feature] rows (EAGLE-3: its layer's input)
  std::vector<float> eagle_embed_, eagle_norm_;  // EAGLE-3: [n_tokens, hidden] the embeddings; a normed copy
  std::vector<float> lm_head_local_;             // EAGLE-3: [logit rows, lm_head rows]
};

}  // namespace engine
