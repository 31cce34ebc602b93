// The model interface the executor drives: one forward pass over a batch of sequence chunks whose keys and
// values live in a paged KV pool owned by the model. The executor decides which blocks each sequence uses
// (kv-cache.h); the model only reads and writes the blocks it is handed.
#pragma once
#include <climits>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "comm/comm.h"
#include "lora/lora-adapter.h"
#include "medusa/medusa-heads.h"
#include "model/model-config.h"
#include "model/prompt-table.h"

namespace engine {

// Where this rank sits in the tensor/pipeline grid (parallel-layout.h says what each rank then holds). World rank
// = pp_rank * tp_size + tp_rank: tp ranks of a stage are neighbours, world rank 0 (stage 0, tp rank 0) leads.
struct ShardInfo {
  int32_t tp_rank = 0, tp_size = 1;
  int32_t pp_rank = 0, pp_size = 1;
  // Expert parallelism inside the tp group (TensorRT-LLM's moe_ep_size): the experts of a mixture-of-experts layer
  // are split over ep_size groups of tp ranks and each expert's intermediate columns over moe_tp = tp / ep_size.
  int32_t ep_size = 1;
  // Decoder layers per pipeline stage (--pp-layers; parallel/pp-partition.h): "" even, "balanced", or "a,b,...".
  std::string pp_layers;
};

// A request's sampling, for a model that samples on its device (Model::samples_on_device): the sampling config plus
// what its penalties read, so the device draws what sampler.h would draw from the same row (the same
// counter-based uniform of (seed, step), the same tie-breaks).
struct DeviceSampling {
  bool greedy = false;  // argmax of the penalised row
  float temperature = 1.0f;
  int32_t top_k = 0;    // 0: no limit
  float top_p = 1.0f;   // 1: no nucleus
  uint64_t seed = 0, step = 0;
  float repetition_penalty = 1.0f, presence_penalty = 0.0f, frequency_penalty = 0.0f;
  // Each distinct token of prompt + output with its count in the output; empty when no penalty is set.
  std::vector<std::pair<int32_t, int32_t>> penalty_tokens;
  // Guided decoding: the tokens that may come next (bit id & 63 of word id >> 6), applied after the penalties as
  // the host's last logits processor is; empty: every token. guided: this row has a guide, whose mask the
  // executor fills during the forward pass (Model::set_sampling_prep), so `allowed` is read only after the prep ran.
  std::vector<uint64_t> allowed;
  bool guided = false;
};

// Where the token after a chunk is drawn. sampling/device-sampling-choice.h decides (the one place that does);
// models obey. A device choice makes forward() return no logits row for the chunk: ForwardOutput::first_row is -1
// and `sampled` holds the token.
enum class SampleOn : uint8_t {
  host,           // the model returns the chunk's logits row(s); the executor's sampler draws the token
  device_argmax,  // the model takes the argmax of the last row on its device (greedy, no logits processor)
  device,         // the model samples the last row on its device with SequenceChunk::device_sampling
};

// One sequence's slice of an iteration: `tokens` are new (prefill chunk, or the one decode token), placed at
// positions [past_len, past_len + tokens.size()). `block_ids` covers positions [0, past_len + tokens.size()):
// position p lives in block block_ids[p / tokens_per_block] at slot p % tokens_per_block.
struct SequenceChunk {
  std::vector<int32_t> tokens;
  int32_t past_len = 0;
  std::vector<int32_t> block_ids;
  bool all_logits = false;  // true: a logits row for every token of the chunk; false: only for the last token
  // max_attention_window_size for this sequence (0: none): every layer attends over at most the last `window`
  // positions (model-config.h's effective_window with the layer's own). Entries of block_ids wholly before the
  // first position any of this chunk's tokens reads may be -1 (released, kv-cache.h).
  int32_t window = 0;
  // Not host only for a model whose samples_on_device() is true. With all_logits (a speculative step's check) every
  // row is drawn into ForwardOutput::row_samples: its argmax, or with SampleOn::device row j's draw of
  // device_sampling.step + j (no penalties or guide then). Neither field is sent to followers (they never sample).
  SampleOn sample_on = SampleOn::host;
  DeviceSampling device_sampling{};  // read when sample_on is SampleOn::device
  // LoRA: the adapter slot (Model::load_lora) the chunk's tokens run with; -1: the base model alone.
  int32_t lora_slot = -1;
  // A token tree (speculation checking several candidates at once; Model::supports_token_trees): empty for the
  // usual causal chunk; else tree_parents[i] is token i's parent in the chunk (-1 for token 0, the root, else in
  // [0, i)), at most kMaxTreeTokens tokens. Token i is written to K/V slot past_len + i as always, but sits at
  // position past_len + its depth (rope, learned positions) and attends to the past and to its ancestors and itself
  // only; with every parent the token before, the chunk is the causal one.
  std::vector<int32_t> tree_parents;
  // A tree grown over several passes (an EAGLE draft guessing depth by depth, each pass only the newest depth): the
  // last tree_past positions of the past are the tree's earlier nodes (the first of them its root), and
  // tree_parents covers them and then the chunk's tokens, tree_past + tokens.size() entries numbered from the root.
  // A token sees the past before the root, and of the tree its ancestors and itself; it sits at the root's position
  // plus its depth. 0: the tree is the chunk's own (the CPU backend alone takes more).
  int32_t tree_past = 0;
  // P-tuning: the request's table (model/prompt-table.h); a token vocab_size + i embeds as its row i. Null: every
  // token is below vocab_size. Only for a model whose supports_prompt_tables() is true.
  std::shared_ptr<const PromptTable> prompt_table;
};
inline constexpr int32_t kMaxTreeTokens = 64;

// A token the model sampled itself: greedy, the argmax (lowest id on ties) and its log-softmax; sampled, the
// token and its log-probability under the distribution it was drawn from (sampler.h's SampledToken).
struct DeviceSample {
  int32_t token = 0;
  float log_prob = 0;
};

// With tp/pp > 1, `logits` is filled on the leader (pp stage 0, tp rank 0) and on every tp rank of the last stage;
// on the other ranks it is left empty. first_row and vocab_size are set on every rank.
struct ForwardOutput {
  std::vector<float> logits;           // [n_rows, vocab_size], rows of all chunks concatenated in chunk order
  std::vector<int32_t> first_row;      // per chunk: index of its first row in `logits`; -1: sampled on the device
  std::vector<DeviceSample> sampled;   // per chunk, valid where first_row is -1
  // An all_logits chunk drawn on the device: each of its rows' token, in order, from index first_sample[chunk] of
  // row_samples (-1 for every other chunk); its `sampled` entry is the last row's.
  std::vector<DeviceSample> row_samples;
  std::vector<int32_t> first_sample;
  int32_t vocab_size = 0;
};

// Communication of the last forward() on this rank (zero on a single rank). Seconds are wall time inside comm
// calls, so for pipeline stages they include waiting for the neighbouring stage's compute.
struct ForwardCommStats {
  double seconds = 0;
  uint64_t bytes = 0;  // payload of this rank's calls: sent, received, or its own buffer in a collective
  int32_t calls = 0;
  uint64_t plan_bytes = 0;  // leader mode: the iteration plan broadcast before this forward (iteration-plan.h)
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;

  // Bytes of KV storage one token takes on this rank (all layers, K and V, fp32).
  virtual size_t kv_bytes_per_token() const = 0;
  // (Re)allocates the KV pool: num_blocks blocks of tokens_per_block tokens. Contents start undefined.
  virtual void allocate_kv(int32_t num_blocks, int32_t tokens_per_block) = 0;
  // Copies every layer's K and V of block `src` into block `dst` (beam search's copy-on-write, kv-cache.h).
  virtual void copy_kv_block(int32_t src, int32_t dst) = 0;
  // Bytes held by weights on this rank (for memory stats).
  virtual size_t weight_bytes() const = 0;

  // Runs every chunk as one batch (one GEMM per weight for all tokens of the iteration), writes K/V of the new
  // tokens into their blocks, and returns logits. Chunks of one call never share a block they write.
  // Tensor/pipeline parallel: every rank of the model calls forward() with the SAME chunks (and the same KV
  // allocation calls before), on the thread that called comm_init; all communication happens inside.
  virtual void forward(const std::vector<SequenceChunk>& chunks, ForwardOutput& out) = 0;
  virtual ForwardCommStats last_comm_stats() const { return {}; }

  // Pipelined pipeline parallelism (TensorRT-LLM's in-flight batching over pp stages), on the rank that drives the
  // model: up to pipeline_depth() passes may be begun and not yet ended, each over its own micro-batch (a sequence
  // in at most one). forward_begin returns once this rank's stage has done its part and passed the activations on,
  // so it can start the next micro-batch while later stages still compute this one; forward_end returns the output
  // of the oldest begun pass, as forward() would have. Followers see only forward(), in the same order. Depth 1
  // (the default): forward() alone, and the two below are never called.
  virtual int32_t pipeline_depth() const { return 1; }
  virtual void forward_begin(const std::vector<SequenceChunk>& chunks) {
    (void)chunks;
    throw std::logic_error("forward_begin on a model without pipelining");
  }
  virtual void forward_end(ForwardOutput& out) {
    (void)out;
    throw std::logic_error("forward_end on a model without pipelining");
  }
  // The leader's plans to its followers go out without waiting while a pipelined pass begins (leader-model.h); a
  // device model that must wait for its device inside forward_begin (and so, through its transfers, for followers
  // that may still need that plan) calls this first, with the world ranks its wait depends on ([0, ranks): while a
  // leader enqueues its own stage, only that stage's): the leader then delivers its plans to them. A follower of a
  // later stage may itself be waiting for this pass's transfers, not yet enqueued, so it must not be waited for
  // there. A host model's waits are MPI calls, which deliver the plans anyway.
  void set_before_device_wait(std::function<void(int32_t ranks)> deliver) { before_device_wait_ = std::move(deliver); }
  // Whether the logit rows of the passes from now on are all device argmaxes (batch-layout.h's all_rows_argmax),
  // told to every rank of a grid alike: LeaderModel sets it on its model from the chunks, followers from the plan.
  // A last pp stage may then send the leader each row's argmax and log-prob instead of the row (a CUDA model does).
  virtual void set_argmax_only(bool on) { (void)on; }

  // Device (GPU) models. on_device: weights, KV and activations live in device memory (memory stats go to
  // gpu_mem_usage). device_free_bytes: free device memory now, after weights and activation buffers (the KV pool
  // is sized from it); 0 for host models. activation_bytes: device scratch held for forward().
  virtual bool on_device() const { return false; }
  virtual size_t device_free_bytes() const { return 0; }
  virtual size_t activation_bytes() const { return 0; }
  // True when forward() honours SequenceChunk::sample_on on this rank: it can take a row's argmax or sample it on its
  // device (the rank that holds the logits of a device model).
  virtual bool samples_on_device() const { return false; }
  // Threads for the host work the executor's loop does beside a device model (guided masks, rows sampled on the
  // host): the executor sets its loop thread's OpenMP count to this. 0: left alone (a host model sets the count
  // for its own forward passes on the calling thread).
  virtual int32_t host_threads() const { return 0; }
  // The logits row the device drew chunk `chunk`'s token from in the last forward(), as its sampler left it (NaN,
  // the guide's mask and the penalties applied, divided by the temperature when it sampled), copied to `row`;
  // false when it cannot be had (no device sampling, or its buffer was reused since). The executor redraws from it
  // when a guided token leaves the output unfinishable in the tokens left.
  virtual bool sampled_row(int32_t chunk, std::vector<float>& row) {
    (void)chunk;
    (void)row;
    return false;
  }
  // Work the executor hands to the next forward() of a model that samples on its device, to run once after the
  // pass's layers are enqueued and before any row is sampled, so it overlaps the device's work: it fills the guided
  // rows' masks (SequenceChunk::device_sampling.allowed of the chunks forward() was given). Null: none.
  using SamplingPrep = std::function<void()>;
  virtual void set_sampling_prep(SamplingPrep prep) { sampling_prep_ = std::move(prep); }
  // How the KV pool stores K and V, for the startup log and the model config: "float32", "bfloat16", "fp8 (e4m3, ...)".
  virtual std::string kv_cache_dtype() const { return ""; }
  // How this rank's tensor-parallel sums run, for the startup log once allocate_kv made the device comms: the GPU
  // backend's peer-memory all-reduce and its sizes, or NCCL alone and why. "" without GPU collectives.
  virtual std::string tp_all_reduce() const { return ""; }

  // LoRA (lora/): the model holds adapters in numbered slots and applies the one a chunk names (SequenceChunk::
  // lora_slot) beside each projection, different slots in one batch. load_lora takes the whole adapter (checked by
  // check_lora_adapter) and keeps this rank's slice (lora-local.h), replacing what the slot held; every rank of a
  // grid gets the same calls in the same order (LeaderModel sends them). Models without LoRA throw unsupported.
  virtual bool supports_lora() const { return false; }
  virtual void load_lora(int32_t slot, const LoraAdapter& adapter);
  // Frees what the slot holds (nothing when empty).
  virtual void unload_lora(int32_t slot);

  // Medusa heads (medusa/), before the first forward(), on the rank that drives the model (the leader of a grid)
  // and, under pp, on the follower that serves its head guesses; models and layouts that cannot run them throw
  // unsupported, saying why. head_guesses runs them on logit rows of the last forward() (numbered in chunk order, a
  // chunk's rows being all its tokens' with all_logits, else its last one's — ForwardOutput::logits' rows where every
  // row is a host row; the hidden states behind them are kept until the next forward): for the i-th row asked,
  // head k's kMedusaTopK best tokens from out[(i * medusa_heads() + k) * kMedusaTopK] (medusa_guesses). Only the
  // rows the executor needs — the one that drew each sequence's last token — so the heads cost one row a sequence a
  // step, whatever the check fed.
  virtual void set_medusa_heads(std::shared_ptr<const MedusaHeads> heads);
  virtual int32_t medusa_heads() const { return 0; }  // how many heads guess (0: none)
  virtual void head_guesses(const std::vector<int32_t>& rows, std::vector<int32_t>& out);
  // Under pp the hidden states the heads read stay on the last stage: the world rank whose model runs the leader's
  // heads (the last stage's first tp rank), or -1 where this rank's forward ends with them itself.
  virtual int32_t head_guess_source() const { return -1; }
  // True on that rank: it loads the heads and answers the leader's head-guess plans (LeaderModel).
  virtual bool serves_head_guesses() const { return false; }
  // Whether forward() takes chunks with tree_parents (SequenceChunk): how speculation checks a tree of candidates.
  virtual bool supports_token_trees() const { return false; }
  // Whether forward() embeds the virtual tokens of chunks with a prompt_table (p-tuning). The executor refuses a
  // request with a table at enqueue when it is false, so a backend without it never sees one.
  virtual bool supports_prompt_tables() const { return false; }

  // EAGLE heads (eagle/eagle-checkpoint.h). A model an EAGLE draft reads from keeps, once asked (before the first
  // forward(), on the rank that drives it), each forward()'s hidden states after the final norm, one row per logits
  // row (numbered as head_guesses' rows), until the next forward(); models and layouts that cannot throw
  // unsupported, saying why. final_hidden: those rows, [rows, hidden]. With aux_layers (EAGLE-3's
  // feature_layers()) each row is instead the residual stream entering each listed layer (0: the embeddings;
  // num_hidden_layers: the last layer's output, before the final norm), side by side in list order,
  // [rows, aux_layers.size() * hidden].
  virtual void keep_final_hidden(const std::vector<int32_t>& aux_layers);
  virtual const float* final_hidden(int64_t& rows) const;
  // An EAGLE draft: each forward() reads, beside each token, a feature row (the model's hidden state at that
  // position, or the draft's own output for a guess), set just before it: [tokens of the pass in chunk order,
  // width] (EAGLE-1/2: width hidden; EAGLE-3: the model's feature_layers().size() * hidden where the model
  // computed the position, hidden for a guess's). Its final_hidden() is its output before the LM head (EAGLE-3:
  // before its final norm), a guess's next feature.
  virtual bool takes_features() const { return false; }
  // The model's layers an EAGLE-3 draft reads (keep_final_hidden's aux_layers); empty: its final hidden states.
  virtual std::vector<int32_t> feature_layers() const { return {}; }
  virtual void set_input_features(const float* rows, int64_t width);

 protected:
  // Runs the prep the executor set, at most once per forward() (a model that samples on its device calls it).
  void run_sampling_prep() {
    if (!sampling_prep_) return;
    SamplingPrep prep = std::move(sampling_prep_);
    sampling_prep_ = nullptr;
    prep();
  }
  void before_device_wait(int32_t ranks = INT32_MAX) {
    if (before_device_wait_) before_device_wait_(ranks);
  }

 private:
  SamplingPrep sampling_prep_;
  std::function<void(int32_t)> before_device_wait_;
};

enum class Device { cpu, cuda, auto_select };  // auto_select: cuda when built and a GPU is visible, else cpu

struct LoadOptions {
  ShardInfo shard;
  // The rank's tensor-parallel group (the tp ranks of its stage, ordered by tp_rank) and pipeline group (the
  // stages holding its tp rank, ordered by pp_rank). Sizes and ranks must match `shard`; default: size 1.
  Comm tp_comm, pp_comm;
  int32_t num_threads = 0;  // 0: all cores
  Device device = Device::cpu;
  // "auto": weights from the checkpoint; "dummy": random weights of the config.json's shapes (benchmarking without
  // a checkpoint: only config.json is read; on CUDA the weights are generated on the GPU).
  std::string load_format = "auto";
  // Device models: "auto" (float16 when config.json's torch_dtype says so, else bfloat16), "bfloat16", "float16".
  std::string dtype = "auto";
  int32_t gpu_device = -1;  // -1: the rank's local rank modulo the visible GPUs
  // "" (weights as the checkpoint has them) or "fp8": a 16/32-bit checkpoint's projections quantized to e4m3
  // per output channel at load, activations quantized per token at run time (--quantization fp8). The CUDA
  // backend quantizes on the GPU (also dummy weights); the LM head and embeddings stay in the model dtype.
  std::string quantization;
  // "auto": K/V in the model's precision, or FP8 where the checkpoint's quantization config says its KV cache is
  // FP8 (compressed-tensors kv_cache_scheme, ModelOpt kv_cache_quant_algo); "fp8": K/V stored as e4m3 with a
  // per-layer scale each for K and V (the checkpoint's k_scale / v_scale when it has them, else 1), dequantized in
  // attention: a pool of the same bytes holds twice the tokens of a 16-bit one (--kv-cache-dtype).
  std::string kv_cache_dtype = "auto";
  // Activation buffers of device models are sized for these once, before the KV pool takes the free memory
  // (the executor's max_num_tokens and max_batch_size).
  int32_t max_num_tokens = 8192;
  int32_t max_batch_size = 64;
  // progress(bytes_done, bytes_total) during weight loading; may be empty.
  void (*progress)(void* user, uint64_t done, uint64_t total) = nullptr;
  void* progress_user = nullptr;
};

// Loads a Hugging Face checkpoint directory (config.json + model.safetensors or model.safetensors.index.json);
// with tp/pp > 1, only this rank's slices (parallel-layout.h). Throws EngineError naming the file / tensor /
// architecture on any problem. Makes no MPI call (it may run on any thread): ranks of a grid then settle whether
// all of them loaded with agree_on_load (load-agreement.h) on the comm thread.
std::unique_ptr<Model> load_model(const std::string& checkpoint_dir, const LoadOptions& options);

// cpu stays cpu; cuda throws EngineError(unsupported) saying why when this build or machine cannot run it;
// auto_select picks cuda when the backend is built and a GPU is visible.
Device resolve_device(Device requested);

}  // namespace engine
