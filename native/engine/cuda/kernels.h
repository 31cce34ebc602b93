// Launchers of the CUDA backend's own kernels (the GEMMs go through cuBLAS, gemm.h). Every launcher is
// asynchronous on `stream` and checks the launch (cudaGetLastError) before returning. Tensors named `T` are in
// the model's dtype (bf16 or fp16, passed as DType), everything else fp32; row-major throughout.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/attention-rows.h"
#include "quant/fp8-matrix.h"

namespace engine::cuda {

enum class DType { bf16, f16 };
inline size_t dtype_size(DType) { return 2; }

enum class Act { silu, gelu, gelu_tanh, relu };  // same set and formulas as cpu/activation.h

// How the paged pools store keys and values: in the model dtype, or (--kv-cache-dtype fp8) as e4m3fn bytes of
// x / scale, read back as byte x scale with the layer's k / v scales (cpu/attention.h's KvStorage::e4m3).
struct KvFormat {
  bool fp8 = false;
  float k_scale = 1.0f, v_scale = 1.0f;
};
inline size_t kv_element_size(DType dt, const KvFormat& f) { return f.fp8 ? 1 : dtype_size(dt); }

// --- elementwise (kernels-elementwise.cu) ---
// x[r] = table[tokens[r] - v0] * scale (T -> fp32), zeros when the id is outside [v0, v0 + nv) (vocab parallel).
void embed(const int32_t* tokens, int64_t rows, const void* table, DType dt, int64_t v0, int64_t nv, int64_t hidden,
           float scale, float* x, cudaStream_t s);
// x[r] += pos_table[positions[r]] (T table).
void add_position_embedding(float* x, const int32_t* positions, int64_t rows, const void* pos_table, DType dt,
                            int64_t hidden, cudaStream_t s);
// out (T) = rms_norm(x) * w  or  layer_norm(x) * w + b (b non-null), per row of `dim`; fp32 math as cpu/norm.h.
void norm(const float* x, void* out, DType dt, int64_t rows, int64_t dim, const float* w, const float* b, float eps,
          cudaStream_t s);
// fp32 values a kernel adds to the rows it reads, where a row has them: row r's start at delta[at[r] * ld], none
// where at[r] < 0 (a LoRA step's deltas, which the kernel after the product adds as it reads the product — the gated
// activation, rope_and_write_kv and attention's own new keys / values — rather than a pass of their own adding them
// first: cuda-decoder-lora.cpp). delta null: none at all.
struct RowDelta {
  const float* delta = nullptr;
  int64_t ld = 0;
  const int32_t* at = nullptr;
};
// For each row t: adds `bias` (nullable, [q_dim + 2 kv_dim]) and the row's deltas in d to the fp32 qkv row, rotates
// q and k heads by positions[t] * inv_freq (nullable: no rotation; HF rotate_half pairing), and writes the row's k and
// v (T) into the paged pools (as `kv` says) at element offset kv_dst[t] + h * tokens_per_block * head_dim for kv head
// h. longrope: inv_freq is [2, head_dim / 2] (short, then long frequencies) and row t rotates by the long ones where
// use_long[t] is set (nullable: inv_freq is [head_dim / 2], or only its short half is used).
void rope_and_write_kv(float* qkv, int64_t rows, int64_t stride, const float* bias, int32_t n_heads, int32_t n_kv,
                       int32_t head_dim, const int32_t* positions, const float* inv_freq, const uint8_t* use_long,
                       void* k_pool, void* v_pool, DType dt, const KvFormat& kv, const int64_t* kv_dst,
                       int32_t tokens_per_block, cudaStream_t s, const RowDelta& d = {});
// Qwen3's per-head norms, in place on the fp32 qkv rows [rows, stride]: adds `bias` (nullable, [q_dim + 2 kv_dim])
// to the whole row, then rms-normalises each query head with q_w and each key head with k_w ([head_dim] each).
// Callers then pass no bias to rope_and_write_kv / attention (it is in already).
void qk_norm(float* qkv, int64_t rows, int64_t stride, const float* bias, int32_t n_heads, int32_t n_kv,
             int32_t head_dim, const float* q_w, const float* k_w, float eps, cudaStream_t s);
// out[t, i] = act(gu[t, i] + b[i]) * (gu[t, inter + i] + b[inter + i])   (gu, out: T; b nullable fp32), with the
// deltas d of gu's rows added to gu first (d.delta 16-byte aligned, d.ld % 4 == 0).
void gated_activation(const void* gu, void* out, DType dt, int64_t rows, int64_t inter, Act act, const float* b,
                      cudaStream_t s, const RowDelta& d = {});
// x[t, i] = act(x[t, i] + b[i]) in place (T; b nullable).
void activation(void* x, DType dt, int64_t rows, int64_t n, Act act, const float* b, cudaStream_t s);
// y[r, i] += b[i] (fp32).
void add_bias(float* y, const float* b, int64_t rows, int64_t n, cudaStream_t s);
// x[r] += rms_norm(y[r]) * w  or  layer_norm(y[r]) * w + b (b non-null), fp32 rows of `dim`, the norm kernel's
// math without rounding to T (Gemma 2's post-attention / post-MLP norms before the residual add).
void add_norm(const float* y, float* x, int64_t rows, int64_t dim, const float* w, const float* b, float eps,
              cudaStream_t s);
// x[i] = cap * tanh(x[i] / cap) for i < n (Gemma 2's final logit soft-capping; cap > 0).
void soft_cap(float* x, int64_t n, float cap, cudaStream_t s);
// dst[i] = src[rows_idx[i]] for i < rows, rows of `n` floats.
void gather_rows(const float* src, const int32_t* rows_idx, float* dst, int64_t rows, int64_t n, cudaStream_t s);
// dst (T) = src (fp32), n elements.
void convert(const float* src, void* dst, DType dt, int64_t n, cudaStream_t s);
// Columns [real, cols) of each row set to -inf (vocab padding of a tp slice).
void mask_columns(float* x, int64_t rows, int64_t cols, int64_t real, cudaStream_t s);
// all: [tp, rows, vl] (each rank's vocab slice) -> out: [rows, vocab], padding dropped.
void assemble_vocab(const float* all, int32_t tp, int64_t rows, int64_t vl, int64_t vocab, float* out, cudaStream_t s);
// dst[r, c] = dummy_value(seed, tensor, (row0 + r) * global_cols + col0 + c) for r < rows, c < cols; dst row
// stride ld. T or fp32 (dt_is_f32).
void fill_dummy(void* dst, bool f32, DType dt, int64_t rows, int64_t cols, int64_t ld, uint64_t seed, uint32_t tensor,
                int64_t row0, int64_t col0, int64_t global_cols, float scale, cudaStream_t s);
void fill_constant(float* dst, int64_t n, float value, cudaStream_t s);

// --- attention (kernels-attention.cu, kernels-attention-mma.cu) ---
// AttnRow / AttnGroup: attention-rows.h.
// This step's keys and values, still in the fp32 qkv rows (q, then k, then v): attention() adds the bias, rotates
// q and k, and writes k and v into the pools as rope_and_write_kv does. For small decode batches the attention
// kernel does it itself (one launch fewer per layer: 0.1 ms of a 4.4 ms batch-1 step of the 8B shape on an H200),
// otherwise rope_and_write_kv runs first.
struct NewKv {
  int64_t tokens;             // qkv rows (every token of the step, also those attention skips)
  const float* bias;          // [q_dim + 2 kv_dim] or null
  const int32_t* positions;   // [tokens] (device)
  const float* inv_freq;      // [head_dim / 2] or null: no rotation; [2, head_dim / 2] with use_long
  const int64_t* kv_dst;      // [tokens] (device): rope_and_write_kv's pool offsets
  const uint8_t* use_long = nullptr;  // [tokens] (device) or null: longrope's choice of table (rope_and_write_kv)
  RowDelta delta;                     // the rows' LoRA deltas, added with the bias (both to q, k and v)
};

struct AttnArgs {
  float* q;  // [*, q_stride], query head h at h * head_dim (rotated in place when `fresh` is set and not fused)
  int64_t q_stride;
  void* k_pool;  // [num_blocks, n_kv, tokens_per_block, head_dim] (T, or e4m3 bytes: kv)
  void* v_pool;
  DType dt;
  KvFormat kv;
  const AttnRow* rows;         // [n_rows] (device)
  const AttnGroup* groups;     // [n_groups] (device): rows grouped by group_attention_rows(.., attention_rows_per_group())
  // [n_wide_groups] (device): the same rows grouped by attention_prefill_rows_per_group(), for the prompt-rows
  // kernel (kernels-attention-prefill.cu); null: not planned (that kernel is not used).
  const AttnGroup* wide_groups = nullptr;
  int32_t n_wide_groups = 0;
  const int32_t* block_tables; // (device)
  int32_t n_rows, n_groups, n_heads, n_kv, head_dim, tokens_per_block;
  float scale;    // scores are (q . k) * scale
  float softcap;  // > 0: scores become softcap * tanh(score / softcap) before the mask and softmax (Gemma 2)
  // This layer's sliding window (0: none): a row sees its last effective_window(window, row.window) positions
  // (attention-window.cuh). The split is sized for it, which relies on the rows of a group being consecutive
  // positions of one sequence (attention-rows.h), as the decoder's are.
  int32_t window;
  void* out;  // [n_rows, out_stride] (T), head h at h * head_dim
  int64_t out_stride;
  int32_t max_ctx;  // largest ctx of any row (sizes the split into partitions)
  // Every row's context gained only its last position in this step (one token per sequence), so the keys and
  // values before it were written by earlier steps and may be read before the previous kernel finished.
  bool new_last_only;
  // Set (kv_dst not null): q is as the qkv projection left it and this step's keys / values are not yet in the
  // pools (NewKv). Null: q is rotated and the pools hold every position.
  NewKv fresh;
};
// How many consecutive rows of one sequence a thread block serves together for this head layout (the `per_group`
// of group_attention_rows): 16 / (query heads per block) on the tensor-core path, 1 on the SIMT one.
int32_t attention_rows_per_group(int32_t n_heads, int32_t n_kv, int32_t head_dim);
// The same for the prompt-rows kernel's blocks (AttnArgs::wide_groups); 0 where that kernel is not built for the
// head size (the rows need no such grouping).
int32_t attention_prefill_rows_per_group(int32_t n_heads, int32_t n_kv, int32_t head_dim);
// Workspace floats attention() needs for `args` (0 when no context is split).
size_t attention_workspace_floats(const AttnArgs& args, int32_t num_sms);
void attention(const AttnArgs& args, float* workspace, int32_t num_sms, cudaStream_t s);
// Whether the attention kernel is built for `head_dim` (16, 32, 64, 128, 256).
bool attention_supports_head_dim(int32_t head_dim);
// An upper bound of attention_workspace_floats over every batch of this head layout (decode batches split).
size_t attention_workspace_bound(int32_t n_heads, int32_t n_kv, int32_t head_dim, int32_t num_sms);

// Programmatic dependent launch of the decode kernels (pdl.cuh): on by default on Hopper; captured CUDA graphs keep
// the setting they were captured with.
void set_pdl(bool on);
bool pdl_on();

// --- decode-shaped matrix products (kernels-gemv.cu) ---
// y[m, n] (+)= x[m, k] · w[n, k]ᵀ for m <= kGemvMaxRows, streaming each weight row once (the decode step is bound
// by reading the weights). y fp32 (ldy) or T (y_is_f32 false). Needs k % 8 == 0 and 16-byte aligned rows.
constexpr int32_t kGemvMaxRows = 8;
bool gemv_applicable(int64_t m, int64_t k);
void gemv(int64_t m, int64_t n, int64_t k, const void* x, const void* w, DType dt, void* y, bool y_is_f32, int64_t ldy,
          bool accumulate, cudaStream_t s);
// The same product of rms_norm(x) * norm_w (fp32 x [m, k], the residual stream; norm_w fp32 [k]) in one kernel,
// with the norm kernel's math except that the normalised x is never rounded to T.
void gemv_rms(int64_t m, int64_t n, int64_t k, const float* x, const float* norm_w, float eps, const void* w, DType dt,
              void* y, bool y_is_f32, int64_t ldy, cudaStream_t s);

// --- mixture-of-experts layers (kernels-moe.cu) ---
// For each row t of the fp32 residual stream x [rows, hidden]: router logits of rms_norm(x[t]) * norm_w against the
// fp32 router [num_experts, hidden] (into `logits`, [rows, num_experts]), softmax, the top_k experts (ties to the
// lower index) into ids[t * top_k + s] and their probabilities (renormalised over the chosen when `renormalize`)
// into weights[t * top_k + s]. Up to 512 experts.
void moe_route(const float* x, int64_t rows, int64_t hidden, const float* norm_w, float eps, const float* router,
               int32_t num_experts, int32_t top_k, bool renormalize, float* logits, int32_t* ids, float* weights,
               cudaStream_t s);
// moe_route's first half alone: the router logits.
void moe_router_logits(const float* x, int64_t rows, int64_t hidden, const float* norm_w, float eps,
                       const float* router, int32_t num_experts, float* logits, cudaStream_t s);
// Rows of a tile of moe_expert_mma, and the most tiles `entries` (token, slot) rows over n_local experts make.
constexpr int32_t kMoeTileRows = 64;
int64_t moe_max_tiles(int64_t entries, int32_t n_local);
// The (token, slot) entries of the local experts [expert_begin, expert_begin + n_local) in expert-contiguous rows:
// offsets[e] .. offsets[e + 1] are local expert e's rows (offsets[n_local]: all of them), active[0 .. a) lists the
// experts with rows and active[n_local] = a, tiles[0] = the number of kMoeTileRows-row tiles of those rows and
// tiles[1 + 2i], tiles[2 + 2i] tile i's expert and first row, slot_row[t * top_k + s] is the entry's row (-1:
// another rank's expert), row_token[row] its token. One block; the order within an expert is not fixed (each row
// is computed on its own).
void moe_permute(const int32_t* ids, int64_t rows, int32_t top_k, int32_t expert_begin, int32_t n_local,
                 int32_t* offsets, int32_t* active, int32_t* tiles, int32_t* slot_row, int32_t* row_token,
                 cudaStream_t s);
// moe_route's second half and moe_permute in one block, for decode-sized batches (rows * top_k + 2 * n_local ints
// fit shared memory): the ids never leave the block.
void moe_topk_permute(const float* logits, int64_t rows, int32_t num_experts, int32_t top_k, bool renormalize,
                      float* weights, int32_t expert_begin, int32_t n_local, int32_t* offsets, int32_t* active,
                      int32_t* tiles, int32_t* slot_row, int32_t* row_token, cudaStream_t s);
// xp[row] = xn[row_token[row]] (T rows of `hidden`) for row < *total (device), over a grid of max_rows.
void moe_gather(const void* xn, DType dt, const int32_t* row_token, const int32_t* total, int64_t max_rows,
                int64_t hidden, void* xp, cudaStream_t s);
// y[row, :n] = x[row, :k] · W_e[n, k]ᵀ for every row of every active expert e, reading only those experts' weights:
// w[e] points at local expert e's [n, k] matrix (T); y fp32 or T; k % 8 == 0. Both read the row layout from the
// device, so neither needs the host (CUDA graphs capture them):
//  - moe_expert_gemv: a GEMV streaming each active expert's rows once per 4 token rows (decode-sized batches);
//    grid rows for up to max_active active experts. It reads x[row_token[row]] when row_token is set (the gather
//    on the way in: x is then xn, not xp);
//  - moe_expert_mma: 64 x 64 tensor-core tiles over moe_permute's tile list (larger batches); up to max_tiles.
void moe_expert_gemv(const void* const* w, const int32_t* offsets, const int32_t* active, int32_t n_local,
                     int32_t max_active, const void* x, const int32_t* row_token, DType dt, int64_t n, int64_t k,
                     void* y, bool y_f32, cudaStream_t s);
void moe_expert_mma(const void* const* w, const int32_t* tiles, const int32_t* offsets, int64_t max_tiles,
                    const void* x, DType dt, int64_t n, int64_t k, void* y, bool y_f32, cudaStream_t s);
// out[t] = base[t] (nullable: 0) + sum over slots of weights[t, s] * y[slot_row[t, s]] (rows -1 skipped)
// + sigmoid(xn[t] · shared_gate_w) * shared[t] (shared nullable: none; xn T rows, shared_gate_w fp32 [hidden]);
// fp32 rows of `hidden`. out may be base.
void moe_combine(const float* y, const int32_t* slot_row, const float* weights, int64_t rows, int32_t top_k,
                 int64_t hidden, const float* base, const float* shared, const void* xn, DType dt,
                 const float* shared_gate_w, float* out, cudaStream_t s);

// --- FP8 weights (kernels-fp8.cu) ---
// An e4m3fn weight on the device (fp8-weights.h makes it from an Fp8Matrix): element (r, c) is
// e4m3(data[r * k + c]) * scale, the scale per output row or per block x block tile. A per-tensor scale is
// uploaded as a per-row one (the same numbers), so the kernels and cuBLASLt see two kinds only.
struct Fp8Weight {
  const uint8_t* data = nullptr;  // [n, k] e4m3fn
  const float* scales = nullptr;  // per row: [n]; block: [ceil(n / block), scale_ld] row-major
  int64_t scale_ld = 0;           // block: ceil(k / block) rounded up to a multiple of 4 (cuBLASLt's layout)
  int32_t block = 0;              // 0: per-row scales; else the tile edge (128 for the HF format)
  Fp8Activation act = Fp8Activation::dynamic_token;  // how the GEMM path quantizes x (gemm.h)
  float input_scale = 1.0f;       // Fp8Activation::static_tensor
};

// How quantize_e4m3 scales rows of x.
enum class Fp8Quant {
  row,     // scales[r] = max|x[r, :]| / 448 (1 for a zero row): per output channel of a weight, per token of x
  group,   // scales[g * scale_ld + r] = max|x[r, g*group : (g+1)*group]| / 448: per token and group of columns
  fixed,   // every element divided by `fixed_scale` (a static input_scale); scales[r] = fixed_scale
};
// q[r, c] = e4m3(x[r, c] / scale), round to nearest even, saturating at +-448 (quant/fp8-matrix.h's encode_e4m3).
// x: [rows, cols] of dtype `dt`, row stride cols. Rows that fit are read into registers at once and quantized from
// there (fp8-quant-row.cuh's quantize_regs); `from_registers` false (the tests' reference) reads them element by
// element and back (quantize_row): the same bytes and scales either way.
void quantize_e4m3(const void* x, DType dt, int64_t rows, int64_t cols, Fp8Quant mode, int32_t group,
                   float fixed_scale, uint8_t* q, float* scales, int64_t scale_ld, cudaStream_t s,
                   bool from_registers = true);
// An FP8 GEMM's quantized activations, made by the kernel that produces them (Gemm::fp8_activation_plan): rows
// [0, rows) quantized as quantize_e4m3(.., mode, group, fixed, q, scales, scale_ld) would quantize them.
struct Fp8ActOut {
  uint8_t* q = nullptr;
  float* scales = nullptr;
  int64_t scale_ld = 0, rows = 0;
  Fp8Quant mode = Fp8Quant::row;
  int32_t group = 0;
  float fixed = 1.0f;
};
// norm() and gated_activation() that, in the same kernel, also quantize their first qa.rows output rows (as
// rounded to T) for an FP8 GEMM: the very bytes and scales quantize_e4m3 would give, one launch and one read of
// the activations fewer.
void norm_e4m3(const float* x, void* out, DType dt, int64_t rows, int64_t dim, const float* w, const float* b,
               float eps, const Fp8ActOut& qa, cudaStream_t s);
void gated_activation_e4m3(const void* gu, void* out, DType dt, int64_t rows, int64_t inter, Act act, const float* b,
                           const Fp8ActOut& qa, cudaStream_t s);
// y[r, c] (fp32, row stride ldy) = src[r, c] (dtype dt, [rows, cols]) or y += that: a 16-bit GEMM output
// into an fp32 destination.
void add_to_f32(const void* src, DType dt, int64_t rows, int64_t cols, float* y, int64_t ldy, bool accumulate,
                cudaStream_t s);
// out[n, k] (dtype dt) = the weight's values, for products no FP8 kernel serves.
void dequantize_e4m3(const Fp8Weight& w, int64_t n, int64_t k, void* out, DType dt, cudaStream_t s);
// The decode GEMV (gemv above) over an e4m3 weight, W8A16: weights widened and scaled in registers, x as given
// (dtype dt, or the fp32 residual stream normalised on the fly when norm_w is set), fp32 sums. Needs k % 16 == 0
// and, for block scales, block % 16 == 0.
bool gemv_fp8_applicable(int64_t m, int64_t k, const Fp8Weight& w);
void gemv_fp8(int64_t m, int64_t n, int64_t k, const void* x, const Fp8Weight& w, DType dt, void* y, bool y_is_f32,
              int64_t ldy, bool accumulate, cudaStream_t s);
void gemv_fp8_rms(int64_t m, int64_t n, int64_t k, const float* x, const float* norm_w, float eps, const Fp8Weight& w,
                  DType dt, void* y, bool y_is_f32, int64_t ldy, cudaStream_t s);

// --- sampling (kernels-sampling.cu) ---
// For each i < n: row = logits + rows_idx[i] * vocab; token[i] = argmax (lowest id on ties), log_prob[i] =
// log-softmax of it, as the host sampler's greedy path.
void greedy_sample(const float* logits, const int32_t* rows_idx, int32_t n, int64_t vocab, int32_t* token,
                   float* log_prob, cudaStream_t s);

// One row sampled on the GPU as sampler.h does on the host (kernels-sampling.cu says how): penalties, then greedy
// or temperature -> top-k -> top-p -> the draw of counter_uniform(seed, step), with the same tie-breaks.
struct SampleSpec {
  int32_t row;         // logits row
  int32_t greedy;      // 1: argmax of the penalised row (temperature not applied)
  int32_t top_k;       // 0 or >= vocab: no limit
  float temperature;   // > 0 unless greedy
  float top_p;         // 1: no nucleus
  float repetition, presence, frequency;
  int32_t pen_begin, pen_count;  // this row's (token, output count) pairs in the penalty arrays
  int32_t mask;                  // guided decoding: this row's allowed-token bitset in `masks` (-1: none)
  int32_t pad_;
  uint64_t seed, step;
};
// Samples specs[i] for i < n into token[i] / log_prob[i]. Rewrites the rows it samples (penalties, temperature).
// masks: [k][mask_words] bitsets (bit id & 63 of word id >> 6: id allowed); a token outside its row's is banned.
void sample_rows(float* logits, int64_t vocab, const SampleSpec* specs, int32_t n, const int32_t* pen_tokens,
                 const int32_t* pen_counts, const uint64_t* masks, int64_t mask_words, int32_t* token,
                 float* log_prob, cudaStream_t s);

}  // namespace engine::cuda
