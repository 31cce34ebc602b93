// The decoder of decoder.h on one GPU: the same forward pass (embedding, per layer norm -> fused qkv -> rope ->
// paged attention -> out proj + residual -> norm -> MLP + residual, final norm, LM head) with weights, KV pool and
// activations in device memory. Weights in bf16 or fp16 (or e4m3 with scales: FP8 checkpoints, --quantization fp8), KV
// in the model dtype or e4m3 (--kv-cache-dtype fp8); the residual stream, norms, rope, softmax and all accumulation
// in fp32. Tensor parallel: the same row/column split as the CPU model, all-reduces and the logits
// all-gather through NCCL; pipeline parallel: activations and logits through NCCL send/recv.
//
// One class over several files, by concept: cuda-decoder.cpp (construction, memory, KV pool), -weights (upload or
// generate the weights), -forward (the iteration: metadata, layers), -logits (LM head, device sampling, copies to
// the host), -graphs (decode batches as CUDA graphs), -lora (adapters in slots, each step's LoRA rows), -medusa
// (Medusa heads, token trees).
#pragma once
#include <cuda_runtime.h>

#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "comm/comm-nccl.h"
#include "cuda/batch-meta.h"
#include "cuda/device-buffer.h"
#include "cuda/device-sampler.h"
#include "cuda/fp8-weights.h"
#include "cuda/gemm.h"
#include "cuda/kernels.h"
#include "cuda/lora-slots.h"
#include "model/batch-layout.h"
#include "model/decoder.h"
#include "model/dummy-weights.h"
#include "model/model.h"
#include "parallel/parallel-layout.h"

namespace engine::cuda {

struct DLinear {
  DeviceBuffer w;  // [out, in], model dtype; empty when the weight is FP8
  DFp8 fp8;        // the weight in e4m3 with its scales (an FP8 checkpoint, or --quantization fp8)
  DeviceBuffer b;  // [out] fp32; empty: no bias
  int64_t out = 0, in = 0;
  const float* bias() const { return b.empty() ? nullptr : b.as<float>(); }
};
struct DNorm {
  DeviceBuffer w, b;  // fp32; b empty for RMSNorm
  const float* bias() const { return b.empty() ? nullptr : b.as<float>(); }
};
// A mixture-of-experts layer's MLP (decoder.h's MoeWeights) on the device.
struct DMoe {
  DeviceBuffer router;                 // [num_experts, hidden] fp32: routing in fp32, as the CPU model routes
  std::vector<DeviceBuffer> up, down;  // per local expert: [2 * cols, hidden] gate|up rows, [hidden, cols] (T)
  DeviceBuffer up_ptrs, down_ptrs;     // device arrays of their addresses (moe_expert_gemv)
  DLinear shared_up, shared_down;      // Qwen2-MoE's shared expert; empty: none
  DeviceBuffer shared_gate;            // [hidden] fp32: its gate
  int64_t cols = 0;                    // each local expert's intermediate columns
  bool on() const { return !up.empty(); }
};
struct DLayer {
  DNorm attn_norm, mlp_norm;
  DNorm q_norm, k_norm;  // Qwen3's per-head norms; empty: none
  DNorm post_attn_norm, post_mlp_norm;  // Gemma 2's norms of the attention / MLP output; empty: none
  DLinear qkv, o, up, down;  // up / down empty in a mixture-of-experts layer
  DMoe moe;
};

class CudaDecoder : public Model {
 public:
  CudaDecoder(const ModelConfig& config, const DecoderSpec& spec, const ParallelLayout& layout,
              const LoadOptions& options);
  ~CudaDecoder() override;

  // Exactly one of these fills the weights; then the activation buffers are reserved.
  void upload(DecoderWeights weights);
  void generate(const DummyPlan& plan, uint64_t seed);

  const ModelConfig& config() const override { return config_; }
  size_t kv_bytes_per_token() const override;
  void allocate_kv(int32_t num_blocks, int32_t tokens_per_block) override;
  void copy_kv_block(int32_t src, int32_t dst) override;
  size_t weight_bytes() const override { return weight_bytes_; }
  // The weight bytes a batch-1 decode step reads: all but an embedding table that is not also the LM head, and in
  // mixture-of-experts layers only the top_k experts the token chose (cuda-decoder-moe.cpp).
  size_t decode_read_bytes() const;
  // True when the projections run in FP8 (an FP8 checkpoint or --quantization fp8).
  bool fp8() const { return !layers_.empty() && layers_[0].qkv.fp8.on(); }
  void forward(const std::vector<SequenceChunk>& chunks, ForwardOutput& out) override;
  ForwardCommStats last_comm_stats() const override { return comm_stats_; }
  // Pipelined pp on the leader (cuda-decoder-pipeline.cpp): two micro-batches in flight, the second's activations
  // going out in one NCCL group with the first's logits coming back.
  int32_t pipeline_depth() const override;
  void forward_begin(const std::vector<SequenceChunk>& chunks) override;
  void forward_end(ForwardOutput& out) override;
  // Under pp the last stage then argmaxes every row itself and sends the leader [tokens | log-probs] of the slice
  // (2 x cap_logit_rows_ words) instead of the logits (cap x vocab floats).
  void set_argmax_only(bool on) override { argmax_only_ = on; }
  bool on_device() const override { return true; }
  size_t device_free_bytes() const override;
  size_t activation_bytes() const override;
  // The leader holds the logits (the last stage sends them to it), so it is the rank that can sample.
  bool samples_on_device() const override { return layout_.leader(); }
  int32_t host_threads() const override { return host_threads_; }
  bool sampled_row(int32_t chunk, std::vector<float>& row) override;
  std::string kv_cache_dtype() const override;
  std::string tp_all_reduce() const override { return tp_dev_ ? tp_dev_->peer_status() : ""; }
  // LoRA (cuda-decoder-lora.cpp): adapters in slots on the device (lora-slots.h); each projection adds the deltas
  // of the rows whose chunk names a loaded slot with two grouped launches (lora-kernels.h), none in a step where no
  // row does. Decode steps with LoRA rows replay CUDA graphs of their own.
  // cuda-decoder-medusa.cpp: Medusa heads on the device, token-tree checks.
  void set_medusa_heads(std::shared_ptr<const MedusaHeads> heads) override;
  int32_t medusa_heads() const override { return static_cast<int32_t>(medusa_.size()); }
  void head_guesses(const std::vector<int32_t>& rows, std::vector<int32_t>& out) override;
  int32_t head_guess_source() const override {
    return layout_.last_stage() ? -1 : (pp_.size() - 1) * tp_.size();  // (world rank = pp_rank * tp + tp_rank)
  }
  bool serves_head_guesses() const override { return pp_.size() > 1 && layout_.last_stage() && tp_.rank() == 0; }
  bool supports_token_trees() const override;
  bool supports_lora() const override { return true; }
  bool supports_prompt_tables() const override { return true; }  // (cuda-decoder-forward.cpp: stage_virtual_rows)
  void load_lora(int32_t slot, const LoraAdapter& adapter) override;
  void unload_lora(int32_t slot) override;
  // --kv-cache-dtype fp8: K/V stored as e4m3 with these per-layer scales (empty: 1 everywhere; `from` says where
  // they came from, for kv_cache_dtype()). Before allocate_kv.
  void use_fp8_kv(std::vector<float> k_scales, std::vector<float> v_scales, std::string from);

  int device() const { return device_; }
  Gemm& gemm() { return *gemm_; }
  // Decode batches replay captured CUDA graphs (default; TRTLLM_CUDA_GRAPHS=0 turns them off).
  void set_use_graphs(bool on) {
    graphs_enabled_ = on;
    drop_graphs();
  }
  // Tests: whether decode-sized steps compute LoRA deltas beside the product (default) or expand after it.
  void set_lora_delta(bool on) {
    lora_delta_on_ = on;
    drop_graphs();
  }
  // Tests: whether prompt chunks over few adapters run the stacked cuBLAS products (default) or the tensor-core
  // kernels.
  void set_lora_stack(bool on) { lora_stack_on_ = on; }

 private:
  static constexpr int64_t kGraphTableEntries = 64 * 1024;  // block-table entries a graph's metadata holds

  void use_device() const;
  void make_device_comms();
  void reserve(int64_t tokens, int64_t logit_rows);
  // cuda-decoder-weights.cpp
  void upload_matrix(const std::vector<float>& host, DeviceBuffer& dst, bool f32);
  void fill_matrix(const DummyMatrix& m, uint64_t seed, DeviceBuffer& dst, bool f32);
  // --quantization fp8: d.w (model dtype, just uploaded or generated) quantized into d.fp8 and freed.
  void quantize_linear(DLinear& d);
  // cuda-decoder-moe.cpp: a mixture-of-experts layer's weights, uploaded or generated, then its pointer tables.
  void upload_moe(MoeWeights& w, DMoe& d);
  void generate_moe(const DummyMoe& m, uint64_t seed, DMoe& d);
  void finish_moe(DMoe& d);
  // Its activation buffers for up to `tokens` rows (reserve()).
  void reserve_moe(int64_t tokens);

  // cuda-decoder-forward.cpp
  // True when this batch runs as a CUDA graph: a decode batch (one token and one last-row logit per chunk), on every
  // rank of a tp / pp grid alike (they see the same chunks), its collectives and transfers captured with it.
  bool use_graph(const std::vector<SequenceChunk>& chunks) const;
  // Fills and uploads the iteration's metadata (batch-meta.h), sized for a graph when `graph`.
  BatchMeta upload_meta(const std::vector<SequenceChunk>& chunks, bool graph);
  // P-tuning: whether this batch has virtual tokens (model/prompt-table.h) and, on the first stage, their input
  // embeddings: table rows times embed_scale in virtual_stage_, their batch rows in virtual_rows_. Such a batch never
  // runs as a graph on any rank of the grid (a one-token prompt can look like a decode step).
  bool stage_virtual_rows(const std::vector<SequenceChunk>& chunks);
  std::vector<int64_t> virtual_rows_;
  std::vector<float> virtual_stage_;
  // Everything from the embedding to the final norm (into xn_), enqueued on the stream. A stage before the last
  // ends by sending its activations on, unless !hand_on (the pipelined leader sends them itself).
  void enqueue_layers(const BatchMeta& m, int64_t T, int64_t R, int32_t max_ctx, bool hand_on = true);
  // forward() after the batch layout: the layers and the LM head of every logit row, then the wait for them.
  void run_whole(const std::vector<SequenceChunk>& chunks, ForwardOutput& out);
  // The stream's work done, once the leader's plans are out (Model::before_device_wait).
  void wait_stream();
  // The world ranks a wait for the stream depends on (Model::before_device_wait): all, but only this stage's while
  // a pipelined leader enqueues its stage (the next pass's transfers are not on the stream yet).
  int32_t wait_ranks_ = INT32_MAX;
  // false while a graph's warm-up runs (graph_for): no all-reduce, gather or stage transfer is enqueued.
  bool transfers_ = true;
  bool argmax_only_ = false;  // set_argmax_only
  // What the last stage sends the leader under pp: the argmaxes (greedy_dev_'s tokens and log-probs) or the logits.
  bool sends_argmaxes() const { return argmax_only_ && pp_.size() > 1; }
  size_t argmax_bytes() const { return static_cast<size_t>(cap_logit_rows_) * 8; }
  void attention_layer(int32_t l, const BatchMeta& m, float* x, int64_t T, int64_t R, int32_t max_ctx, bool last);
  // logit_rows: the model's last layer, run over the R logit rows (their LoRA slots are the logit rows' chunks').
  void mlp_layer(int32_t l, float* x, int64_t rows, bool logit_rows);
  // Which projection a LoRA delta belongs to, and over which rows: the step's token rows, or its logit rows (the
  // model's last layer past attention).
  struct LoraAt {
    int32_t layer;
    LoraTarget target;
    bool logit_rows;
  };
  // cuda-decoder-moe.cpp: route -> permute -> gather -> the active experts' gate|up, activation, down -> the
  // weighted combine (+ shared expert) onto x, summed over tp.
  void moe_layer(int32_t l, float* x, int64_t rows);
  // The experts' products for `entries` (token, slot) rows: the expert GEMV while the experts get few rows each
  // (moe_gemv_fits: bound by reading the weights), the tensor-core tiles beyond.
  void moe_experts(const DMoe& m, int64_t entries);
  static constexpr int64_t kMoeGemvEntries = 128;
  // The GEMV streams an expert's weights once per 4 of its rows, so it also needs few rows per expert on average:
  // Mixtral's 8 experts at batch 64 (16 rows each) took 297.6 ms a step through it against 87.6 ms at batch 256
  // through the tiles (one H200, 2026-11-26).
  static constexpr int64_t kMoeGemvRowsPerExpert = 4;
  bool moe_gemv_fits(int64_t entries) const {
    return entries <= kMoeGemvEntries && entries <= kMoeGemvRowsPerExpert * config_.moe.num_experts;
  }
  // x_quantized: the kernel that made x also quantized it for l's FP8 GEMM (Gemm::fp8_activation_plan).
  void linear(const DLinear& l, const void* x, int64_t rows, void* y, bool y_f32, bool accumulate,
              bool x_quantized = false);
  // y = norm(x) · lᵀ: one fused GEMV on decode shapes with an RMSNorm (Gemm::xwt_rms), else the norm kernel into
  // xn_ and linear(). lora: the projection's LoRA deltas go into y too (their shrink reads x and normalises it
  // itself under an RMSNorm, so it runs beside the product whichever path that takes; xn_ under a LayerNorm).
  void norm_linear(const DNorm& n, const float* x, int64_t rows, const DLinear& l, void* y, bool y_f32,
                   const LoraAt* lora = nullptr, RowDelta* defer = nullptr);
  void row_parallel(const DLinear& l, const void* x, int64_t rows, float* y, bool x_quantized = false,
                    const LoraAt* lora = nullptr);
  // The o / down projection onto the residual y: row_parallel, or with a post norm (Gemma 2) the whole product
  // (summed over tp) in proj_, normed, then added. LoRA deltas join the product before the sum over tp (each tp
  // rank's are partial sums over its input columns, lora-local.h).
  void add_projection(const DLinear& l, const DNorm& post_norm, const void* x, int64_t rows, float* y,
                      bool x_quantized = false, const LoraAt* lora = nullptr);
  void all_reduce(float* x, size_t n);

  // cuda-decoder-lora.cpp
  // This step's LoRA rows: each token row's and logit row's slot (-1: the chunk names none, or an empty slot),
  // grouped into tiles; lora_step_ says whether any row runs an adapter. Grows the shrink's scratch.
  void plan_lora(const std::vector<SequenceChunk>& chunks);
  // Bytes of the step's LoRA rows in the metadata block (after batch-meta's arrays; sized for a graph's bound, so
  // that a batch size always lays them out alike), and filling them in (lora_all_ / lora_last_ then point there).
  size_t lora_meta_bytes() const;
  void fill_lora_meta(char* host, const char* device, bool graph);
  // A projection's LoRA deltas, around its product (nothing when `at` is null or no row runs an adapter touching
  // it): lora_begin enqueues the shrink of x [rows, ldx] of the model dtype, or with norm_w of the fp32 residual
  // stream under an RMSNorm of weight norm_w (the norm is the shrink's and expand's own, so the shrink need not wait
  // for the product's norm); lora_end, after the product, adds the deltas into y[:, :n] (fp32 or the model dtype,
  // row stride ldy). In a step of kLoraDeltaMinRows + 1 .. kLoraDeltaRows tokens the deltas are computed beside the
  // product, after the shrink on its stream, and lora_end only adds them (lora_expand_delta / lora_add); in a wider
  // one lora_end runs them as stacked cuBLAS products on x (then normalised: no norm_w), or on tensor cores
  // (lora_*_wide). n: the product's columns. deferrable / defer (nullable): the caller's next kernel can add the
  // deltas itself; in a step whose deltas are computed beside the product (then also steps of up to
  // kLoraDeltaMinRows tokens) they are handed to it in *defer rather than added to y (*defer stays empty otherwise).
  void lora_begin(const LoraAt* at, const void* x, const float* norm_w, int64_t ldx, int64_t in, int64_t n,
                  bool deferrable = false);
  void lora_end(const LoraAt* at, void* y, bool y_f32, int64_t ldy, int64_t n, RowDelta* defer = nullptr);
  // A stacked step's deltas of one projection (lora-kernels.h's lora_stack): the adapters stacked, then two cuBLAS
  // products on the input lora_begin saw (x as the base product reads it) and y += their deltas.
  void lora_stacked(const LoraAt& at, const LoraRowsDev& rows, const LoraTargetDesc* table, void* y, bool y_f32,
                    int64_t ldy, int64_t n);

  // cuda-decoder-logits.cpp
  // Logits of rows [r0, r0 + n) of the final activations; on the leader, samples them on the device or copies them
  // to out.logits, as each chunk's SampleOn says (batch_ tells which chunk and host row each logit row has).
  void lm_head_rows(const void* xn, int64_t r0, int64_t n, const std::vector<SequenceChunk>& chunks,
                    ForwardOutput& out);
  // The leader's part of it: the logit rows (on the device) argmaxed, sampled, or copied to out.logits; waits for
  // the stream. logits null: the last stage argmaxed every row (greedy_dev_ holds them in order).
  void take_rows(float* logits, int64_t r0, int64_t n, const std::vector<SequenceChunk>& chunks, ForwardOutput& out);
  // The LM head of rows [r0, r0 + n) on the last stage, gathered over the tp ranks and sent to the leader under pp:
  // the leader's full-vocab logits (logits_local_ on one GPU, else logits_full_), null on every other rank and when
  // the last stage sent the rows' argmaxes instead (sends_argmaxes: they are in greedy_dev_).
  float* lm_head_to_leader(const void* xn, int64_t r0, int64_t n);
  // Rows [r0, r0 + n) of the logit rows whose chunks ask for SampleOn::device (logits row i = row r0 + i): sampled
  // on the GPU by sampler_ (finished by sampler_.finish after the stream synchronised).
  void enqueue_sampling(float* logits, int64_t r0, int64_t n, const std::vector<SequenceChunk>& chunks,
                        const ForwardOutput& out);
  // A graph's tail: the LM head over all rows (to the leader, as lm_head_to_leader) and the leader's argmax kernel
  // over all of them.
  void enqueue_logits_and_greedy(int64_t rows);

  // cuda-decoder-graphs.cpp
  struct Graph {
    cudaGraphExec_t exec = nullptr;
    ForwardCommStats comm;  // the transfers it replays (counted as its capture enqueued them)
  };
  // A decode batch through the graph of its batch size and context bucket (captured on first use), then its
  // tokens and host rows read back into `out`.
  void run_graph(const BatchMeta& m, const std::vector<SequenceChunk>& chunks, ForwardOutput& out);
  // A pipelined leader's decode batch: the graph of its stage alone (no hand-over, no logits) replayed.
  void run_stage_graph(const BatchMeta& m);
  // hand_on false: the stage alone (enqueue_layers' hand_on), the LM head and argmax left out.
  const Graph& graph_for(const BatchMeta& m, int64_t T, int32_t bucket, bool hand_on = true);
  static int32_t context_bucket(int32_t max_ctx);
  void drop_graphs();

  ModelConfig config_;
  DecoderSpec spec_;
  ParallelLayout layout_;
  Comm tp_, pp_;
  std::unique_ptr<DeviceComm> tp_dev_, pp_dev_;
  DType dt_;
  Act act_;
  int device_ = 0;
  int num_sms_ = 0;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<Gemm> gemm_;
  int32_t max_num_tokens_, max_batch_size_;

  // Weights (this rank's slices).
  DeviceBuffer embed_, pos_embed_, lm_head_;
  DeviceBuffer inv_freq_;  // [head_dim / 2]; longrope: [2, head_dim / 2], the short then the long frequencies
  DNorm final_norm_;
  std::vector<DLayer> layers_;
  size_t weight_bytes_ = 0;
  int64_t q_dim_, kv_dim_, inter_;
  int32_t num_heads_, num_kv_heads_, num_layers_;

  // KV pool: [layer][k, v][num_blocks][n_kv][tokens_per_block][head_dim], one allocation, of the model dtype or
  // (fp8) e4m3 bytes with per-layer scales.
  DeviceBuffer kv_;
  bool kv_fp8_ = false;
  std::vector<float> k_scales_, v_scales_;  // [local layers] (fp8)
  std::string kv_scales_from_;
  KvFormat kv_format(int32_t layer) const {
    return kv_fp8_ ? KvFormat{true, k_scales_[layer], v_scales_[layer]} : KvFormat{};
  }
  size_t kv_element_bytes() const { return kv_fp8_ ? 1 : dtype_size(dt_); }
  int32_t num_blocks_ = 0, tokens_per_block_ = 0;
  int64_t block_elems_ = 0;  // n_kv * tokens_per_block * head_dim

  // The iteration's rows (model/batch-layout.h), refilled by every forward().
  BatchLayout batch_;

  // Activations, sized by reserve() (grown if an iteration ever needs more).
  int64_t cap_tokens_ = 0, cap_logit_rows_ = 0;
  DeviceBuffer x_, x2_, xn_, qkv_, attn_, mlp_, mlp_act_, attn_ws_;
  DeviceBuffer proj_;  // [tokens, hidden] fp32: add_projection's product (sandwich_norms only)
  DeviceBuffer logits_local_, logits_all_, logits_full_;
  DeviceBuffer meta_dev_, greedy_dev_;
  PinnedBuffer meta_host_, logits_host_, greedy_host_;

  // Mixture-of-experts scratch (reserve_moe): routing, permutation, the gathered rows and the experts' products.
  DeviceBuffer moe_logits_, moe_ids_, moe_weights_, moe_slot_, moe_row_token_, moe_offsets_, moe_active_, moe_tiles_;
  DeviceBuffer moe_xp_, moe_h_, moe_act_, moe_y_, moe_out_, moe_shared_y_;

  DeviceSampler sampler_;  // rows of SampleOn::device chunks
  DeviceBuffer iota_;  // 0, 1, ..., cap_logit_rows_ - 1: the greedy rows of a graph
  bool graphs_enabled_ = true;
  bool fuse_norm_ = true;  // norm_linear may fuse (TRTLLM_CUDA_FUSE_NORM=0: never, for comparison)
  bool fuse_kv_ = true;    // attention() may take the new keys / values itself (TRTLLM_CUDA_FUSE_KV=0: never)
  // The norm / gated activation before an FP8 GEMM quantize its activations themselves (TRTLLM_FP8_FUSE_QUANT=0:
  // a separate pass, for comparison; the same bytes either way).
  bool fuse_quant_ = true;
  bool quantize_fp8_ = false;  // LoadOptions::quantization "fp8"
  // LoadOptions::num_threads (--threads), or every core the process may use: the executor's host work beside the
  // GPU would otherwise run on OMP_NUM_THREADS, which the launcher sets to 1 for every rank.
  int32_t host_threads_ = 1;
  std::map<uint64_t, Graph> graphs_;  // by (batch size, context bucket, LoRA rows or not)

  // LoRA: the slots, and this step's rows (plan_lora): slot per token row then per logit row [T + R], the grouped
  // rows of each view [T + R] and their tiles (the token rows' first), the tile counts, their device views.
  DeviceLoraSlots lora_;
  uint64_t lora_epoch_ = 0;  // lora_.epoch() the graphs were captured with
  bool lora_step_ = false;
  std::vector<int32_t> lora_slot_, lora_rows_;
  std::vector<LoraTile> lora_tiles_;
  int32_t lora_n_tiles_[2] = {0, 0};
  LoraRowsDev lora_all_, lora_last_;
  DeviceBuffer lora_t_;  // the shrink's output (lora_scratch_ says how it is laid out)
  LoraScratch lora_scratch_;
  // The deltas of a decode-sized step: [kLoraDeltaRows][lora_delta_ld_] fp32, made by the first step that uses them
  // (TRTLLM_LORA_DELTA=0: never; the expand adds into y after the product). Steps of more than kLoraDeltaMinRows
  // tokens only: below, the products are GEMVs that the side stream's two kernels slow more than an expand after
  // them costs (H200, 8B shape, batch 1: +15.5% a step against +11.1%; batch 64: +24% against +28.5%).
  // Smaller steps split too where the next kernel adds the deltas itself (lora_end's defer: the gated activation,
  // rope_and_write_kv and attention's own new keys / values), for then nothing waits after the product
  // (TRTLLM_LORA_DEFER_SMALL=0: they do not).
  static constexpr int64_t kLoraDeltaRows = 256, kLoraDeltaMinRows = 8;
  DeviceBuffer lora_delta_;
  int64_t lora_delta_ld_ = 0;
  bool lora_delta_on_ = true, lora_delta_step_ = false, lora_defer_small_on_ = true, lora_small_step_ = false;
  bool lora_split_ = false;  // between lora_begin and lora_end: this projection's deltas are computed beside it
  // Steps of more than kLoraDeltaRows tokens (prefill chunks) run the stacked products below or the tensor-core
  // kernels (lora_shrink_wide / lora_expand_wide; TRTLLM_LORA_WIDE=0: the decode kernels).
  bool lora_wide_on_ = true, lora_wide_step_ = false;
  // Wide steps whose rows run at most kLoraStackSlots adapters stack them (lora_stack) and run the deltas as cuBLAS
  // products (their cost grows with the adapters stacked, the kernels' does not; TRTLLM_LORA_STACK=0: the
  // kernels). The shrink then reads x after the norm, from lora_x_. lora_stack_buf_ holds A_st, B_st, t and t'
  // (lora_stack_at_: their byte offsets), sized for the step by plan_lora.
  static constexpr int32_t kLoraStackSlots = 16;
  bool lora_stack_on_ = true, lora_stack_step_ = false;
  std::vector<int32_t> lora_stack_slots_, lora_block_;  // per view (all rows, then logit rows), as lora_rows_
  int32_t lora_n_slots_[2] = {0, 0};
  DeviceBuffer lora_stack_buf_;
  size_t lora_stack_at_[4] = {0, 0, 0, 0};
  const void* lora_x_ = nullptr;
  int64_t lora_ldx_ = 0;
  // The shrink runs on lora_stream_, forked from stream_ and joined back through the two events (TRTLLM_LORA_FORK=0:
  // on stream_). Made by the first load_lora.
  cudaStream_t lora_stream_ = nullptr;
  cudaEvent_t lora_fork_ = nullptr, lora_join_ = nullptr;
  bool lora_fork_on_ = true;
  bool lora_join_prog_ = true;  // the join recorded by the forked stream's last kernel (pdl.cuh's launch_ex)
  // Between lora_begin and lora_end: whether a shrink was enqueued, for an input of lora_in_ columns under a norm.
  bool lora_pending_ = false, lora_norm_ = false;
  int64_t lora_in_ = 0;

  // Medusa heads (cuda-decoder-medusa.cpp): each head's residual blocks and vocabulary projection, and the scratch
  // of one pass over up to medusa_cap_rows_ rows: the rows asked (device / pinned), the gathered final-norm rows
  // and a head's running copy of them, a block's product, every head's logits, their best ids.
  struct DMedusaHead {
    std::vector<DLinear> blocks;
    DLinear out;
  };
  std::vector<DMedusaHead> medusa_;
  int64_t medusa_cap_rows_ = 0;
  DeviceBuffer medusa_rows_, medusa_x0_, medusa_x_, medusa_t_, medusa_logits_, medusa_ids_;
  PinnedBuffer medusa_rows_host_, medusa_ids_host_;

  ForwardCommStats comm_stats_;

  // cuda-decoder-pipeline.cpp: micro-batches begun and not yet ended, oldest first.
  struct PipelinedPass {
    ForwardOutput out;
    BatchLayout batch;                  // its rows (batch_ is the next pass's by the time it ends)
    std::vector<SequenceChunk> chunks;  // how its rows are sampled
    int64_t rows = 0;                   // logit rows the last stage sends back
    bool argmax_only = false;           // they come as the last stage's argmaxes (sends_argmaxes)
    bool logits_posted = false;         // their receive is on the stream (into logits_full_ or greedy_dev_)
    bool done = false;                  // `out` is final
    ForwardCommStats comm;
  };
  std::deque<PipelinedPass> passes_;
  // Recorded after a pipelined pass's metadata upload: the next begin rewrites the pinned metadata only after it
  // (two begins can follow each other with no end, hence no stream synchronisation, in between).
  cudaEvent_t meta_uploaded_ = nullptr;
  // Whether a begun pass can overlap the one before it (else the earlier ones end and it runs whole).
  bool pass_overlaps(const std::vector<SequenceChunk>& chunks) const;
  // The leader takes a pass's logits: its receive posted if it is not yet, then take_rows.
  void take_pass(PipelinedPass& p);
  // What the last stage sends back for a pass, and where it lands.
  size_t logits_bytes(const PipelinedPass& p) const;
  void* logits_into(const PipelinedPass& p);
};

}  // namespace engine::cuda
