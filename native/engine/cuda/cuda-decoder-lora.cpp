// LoRA on the GPU: adapters loaded into slots (lora-slots.h), and per step the rows whose chunk names a loaded
// slot, grouped by slot into tiles (lora-rows.h) that travel in the step's metadata block, so a captured decode
// graph replays with each step's rows. Every projection then adds its deltas with two launches (lora-kernels.h):
// the shrink as soon as the projection's input exists, on a stream forked from the main one so that it runs beside
// the projection's product (which takes far longer), and the expand on the main stream after the product
// (cuda-decoder-forward.cpp). Steps of 9-256 tokens also expand beside the product, into a delta buffer, and only
// add it after (lora_add), or the next kernel adds them as it reads that product — the gated activation the gate | up
// deltas, rope / attention the qkv ones (then steps of up to 8 tokens split those projections too: nothing of them
// waits after the product); steps of more tokens stack their adapters and run the deltas as two cuBLAS products
// after the base one (lora_stacked), or with more than kLoraStackSlots adapters take the tensor-core kernels
// (kernels-lora-wide.cu). A step without such rows launches nothing extra.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "cuda/cuda-decoder.h"
#include "lora/lora-local.h"

namespace engine::cuda {
namespace {

size_t align8(size_t n) { return (n + 7) / 8 * 8; }

// One view's arrays in the metadata block: rows [n], their inverse [n], each row's stacked block [n], the view's
// slots [slots], tiles [max tiles for n rows].
struct LoraViewLayout {
  size_t rows, grouped, block, slots, tiles, total;
};
LoraViewLayout lora_view_layout(size_t at, int64_t n, int32_t slots) {
  LoraViewLayout v{};
  v.rows = at;
  v.grouped = v.rows + 4 * static_cast<size_t>(n);
  v.block = v.grouped + 4 * static_cast<size_t>(n);
  v.slots = v.block + 4 * static_cast<size_t>(n);
  v.tiles = align8(v.slots + 4 * static_cast<size_t>(slots));
  v.total = align8(v.tiles + sizeof(LoraTile) * static_cast<size_t>(lora_max_tiles(n, slots)));
  return v;
}

}  // namespace

void CudaDecoder::load_lora(int32_t slot, const LoraAdapter& adapter) {
  use_device();
  if (!lora_.initialized()) {
    // The projections' widths on this rank, which every segment must fit.
    std::vector<std::array<LoraProjection, kLoraTargetCount>> widths(layers_.size());
    for (size_t l = 0; l < layers_.size(); ++l) {
      const DLayer& lw = layers_[l];
      widths[l][static_cast<int>(LoraTarget::qkv)] = {lw.qkv.in, lw.qkv.out};
      widths[l][static_cast<int>(LoraTarget::o)] = {lw.o.in, lw.o.out};
      widths[l][static_cast<int>(LoraTarget::up)] = {lw.up.in, lw.up.out};
      widths[l][static_cast<int>(LoraTarget::down)] = {lw.down.in, lw.down.out};
    }
    lora_.init(std::move(widths), dt_);
  }
  if (lora_stream_ == nullptr) {
    // TRTLLM_LORA_FORK=0: the shrink on the main stream too (for comparison); TRTLLM_LORA_DELTA=0: the expand after
    // the product in every step; TRTLLM_LORA_DEFER_SMALL=0: after it in steps of up to 8 tokens;
    // TRTLLM_LORA_JOIN=plain: the join an ordinary event record.
    if (const char* f = std::getenv("TRTLLM_LORA_FORK")) lora_fork_on_ = std::string(f) != "0";
    if (const char* f = std::getenv("TRTLLM_LORA_DELTA")) lora_delta_on_ = std::string(f) != "0";
    if (const char* f = std::getenv("TRTLLM_LORA_WIDE")) lora_wide_on_ = std::string(f) != "0";
    if (const char* f = std::getenv("TRTLLM_LORA_STACK")) lora_stack_on_ = std::string(f) != "0";
    if (const char* f = std::getenv("TRTLLM_LORA_DEFER_SMALL")) lora_defer_small_on_ = std::string(f) != "0";
    if (const char* f = std::getenv("TRTLLM_LORA_JOIN")) lora_join_prog_ = std::string(f) != "plain";
    // The highest priority: the shrink's few blocks go ahead of the product's waiting ones, so that it finishes
    // beside the product rather than after it (a captured graph keeps the priority on the node).
    int least = 0, greatest = 0;
    check_cuda(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange");
    check_cuda(cudaStreamCreateWithPriority(&lora_stream_, cudaStreamNonBlocking, greatest), "cudaStreamCreate");
    check_cuda(cudaEventCreateWithFlags(&lora_fork_, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventCreateWithFlags(&lora_join_, cudaEventDisableTiming), "cudaEventCreate");
  }
  lora_.load(slot, localize_lora(adapter, config_, layout_), stream_);
  if (lora_.epoch() != lora_epoch_) {
    drop_graphs();  // they hold the old table's address or too small a grid
    lora_epoch_ = lora_.epoch();
  }
}

void CudaDecoder::unload_lora(int32_t slot) {
  use_device();
  lora_.unload(slot, stream_);
}

void CudaDecoder::plan_lora(const std::vector<SequenceChunk>& chunks) {
  lora_step_ = lora_stack_step_ = false;
  if (lora_.empty()) return;
  bool any = false;
  for (const SequenceChunk& ch : chunks) any = any || lora_.loaded(ch.lora_slot);
  if (!any) return;
  const int64_t T = batch_.num_tokens, R = batch_.num_out_rows();
  // A slot that holds nothing is the base model (as the CPU model treats it).
  auto slot_of = [&](int32_t chunk) {
    const int32_t s = chunks[static_cast<size_t>(chunk)].lora_slot;
    return lora_.loaded(s) ? s : -1;
  };
  lora_slot_.resize(static_cast<size_t>(T + R));
  for (int64_t t = 0; t < T; ++t) lora_slot_[t] = slot_of(batch_.token_chunk[t]);
  for (int64_t r = 0; r < R; ++r) lora_slot_[T + r] = slot_of(batch_.out_chunk[r]);
  const int32_t cap = lora_.capacity();
  lora_rows_.resize(static_cast<size_t>(T + R));
  lora_tiles_.resize(static_cast<size_t>(lora_max_tiles(T, cap) + lora_max_tiles(R, cap)));
  int64_t grouped = 0;
  lora_n_tiles_[0] = group_lora_rows(lora_slot_.data(), T, cap, lora_rows_.data(), lora_tiles_.data(), &grouped);
  lora_n_tiles_[1] = group_lora_rows(lora_slot_.data() + T, R, cap, lora_rows_.data() + T,
                                     lora_tiles_.data() + lora_max_tiles(T, cap), &grouped);
  lora_block_.resize(static_cast<size_t>(T + R));
  lora_stack_slots_.resize(2 * static_cast<size_t>(cap));
  lora_n_slots_[0] = stack_lora_slots(lora_rows_.data(), lora_tiles_.data(), lora_n_tiles_[0], T,
                                      lora_stack_slots_.data(), lora_block_.data());
  lora_n_slots_[1] = stack_lora_slots(lora_rows_.data() + T, lora_tiles_.data() + lora_max_tiles(T, cap),
                                      lora_n_tiles_[1], R, lora_stack_slots_.data() + cap, lora_block_.data() + T);
  lora_step_ = true;
  // The shrink's output, [k slices][grouped rows <= T][t_stride + 1] fp32, sized for the reserved tokens at once:
  // a graph holds its address.
  int64_t widest = 0, widest_out = 0;
  for (const DLayer& lw : layers_) {
    widest = std::max({widest, lw.qkv.in, lw.o.in, lw.up.in, lw.down.in});
    widest_out = std::max({widest_out, lw.qkv.out, lw.o.out, lw.up.out, lw.down.out});
  }
  lora_scratch_.ldt = lora_.t_stride() + 1;
  lora_scratch_.slice_stride = std::max(cap_tokens_, T) * lora_scratch_.ldt;
  const size_t need = static_cast<size_t>(lora_k_slices(widest)) * static_cast<size_t>(lora_scratch_.slice_stride) * 4;
  if (need > lora_t_.bytes()) {
    drop_graphs();
    lora_t_.reset(need);
  }
  lora_scratch_.t = lora_t_.as<float>();
  // Decode-sized steps: the deltas beside the product (a buffer for the widest projection, made once: graphs hold
  // its address).
  lora_delta_step_ = lora_delta_on_ && lora_fork_on_ && T > kLoraDeltaMinRows && T <= kLoraDeltaRows;
  lora_small_step_ = lora_delta_on_ && lora_fork_on_ && lora_defer_small_on_ && T <= kLoraDeltaMinRows;
  lora_wide_step_ = lora_wide_on_ && T > kLoraDeltaRows;
  lora_stack_step_ = lora_wide_step_ && lora_stack_on_ && lora_n_slots_[0] <= kLoraStackSlots;
  if (lora_stack_step_) {
    // A_st, B_st, t (fp32) and t' for the widest projection and every row (the logit rows' view is a subset).
    auto round256 = [](size_t b) { return (b + 255) / 256 * 256; };
    const size_t width = static_cast<size_t>(lora_n_slots_[0]) * static_cast<size_t>(lora_.t_stride());
    const size_t es = dtype_size(dt_);
    const size_t sizes[4] = {width * static_cast<size_t>(widest) * es, static_cast<size_t>(widest_out) * width * es,
                             static_cast<size_t>(T) * width * 4, static_cast<size_t>(T) * width * es};
    size_t at = 0;
    for (int i = 0; i < 4; ++i) {
      lora_stack_at_[i] = at;
      at += round256(sizes[i]);
    }
    if (at > lora_stack_buf_.bytes()) {
      drop_graphs();
      lora_stack_buf_.reset(at);
    }
  }
  if ((lora_delta_step_ || lora_small_step_) && lora_delta_.bytes() == 0) {
    lora_delta_ld_ = (widest_out + 3) / 4 * 4;  // 16-byte rows
    drop_graphs();
    lora_delta_.reset(static_cast<size_t>(kLoraDeltaRows * lora_delta_ld_) * sizeof(float));
  }
}

size_t CudaDecoder::lora_meta_bytes() const {
  const int32_t cap = lora_.capacity();
  const LoraViewLayout all = lora_view_layout(0, batch_.num_tokens, cap);
  return lora_view_layout(all.total, batch_.num_out_rows(), cap).total;
}

void CudaDecoder::fill_lora_meta(char* host, const char* device, bool graph) {
  const int64_t T = batch_.num_tokens, R = batch_.num_out_rows();
  const int32_t cap = lora_.capacity();
  const LoraViewLayout all = lora_view_layout(0, T, cap), last = lora_view_layout(all.total, R, cap);
  auto put = [&](const LoraViewLayout& v, int64_t n, const int32_t* rows, const LoraTile* tiles, int32_t n_tiles,
                 const int32_t* block, const int32_t* slots, int32_t n_slots, LoraRowsDev& dev) {
    // A graph's launches cover every tile count its batch size can have: the tiles past this step's are empty.
    const int32_t max_tiles = graph ? lora_max_tiles(n, cap) : n_tiles;
    std::copy(rows, rows + n, reinterpret_cast<int32_t*>(host + v.rows));
    invert_lora_rows(rows, tiles, n_tiles, n, reinterpret_cast<int32_t*>(host + v.grouped));
    std::copy(block, block + n, reinterpret_cast<int32_t*>(host + v.block));
    std::copy(slots, slots + n_slots, reinterpret_cast<int32_t*>(host + v.slots));
    LoraTile* out = reinterpret_cast<LoraTile*>(host + v.tiles);
    std::copy(tiles, tiles + n_tiles, out);
    std::fill(out + n_tiles, out + max_tiles, LoraTile{0, 0, 0});
    dev.rows = reinterpret_cast<const int32_t*>(device + v.rows);
    dev.grouped = reinterpret_cast<const int32_t*>(device + v.grouped);
    dev.tiles = reinterpret_cast<const LoraTile*>(device + v.tiles);
    dev.max_tiles = max_tiles;
    dev.grid_tiles = graph ? lora_grid_tiles(n, cap) : n_tiles;
    dev.block = reinterpret_cast<const int32_t*>(device + v.block);
    dev.slots = reinterpret_cast<const int32_t*>(device + v.slots);
    dev.n_slots = n_slots;
    dev.n = n;
  };
  put(all, T, lora_rows_.data(), lora_tiles_.data(), lora_n_tiles_[0], lora_block_.data(), lora_stack_slots_.data(),
      lora_n_slots_[0], lora_all_);
  put(last, R, lora_rows_.data() + T, lora_tiles_.data() + lora_max_tiles(T, cap), lora_n_tiles_[1],
      lora_block_.data() + T, lora_stack_slots_.data() + cap, lora_n_slots_[1], lora_last_);
}

void CudaDecoder::lora_begin(const LoraAt* at, const void* x, const float* norm_w, int64_t ldx, int64_t in,
                             int64_t n, bool deferrable) {
  lora_pending_ = false;
  lora_split_ = lora_delta_step_ || (lora_small_step_ && deferrable);
  if (at == nullptr || !lora_step_) return;
  const int32_t rank = lora_.rank_bound(at->layer, at->target);
  if (rank == 0) return;  // no adapter loaded touches this projection
  lora_pending_ = true;
  lora_in_ = in;
  lora_norm_ = norm_w != nullptr;
  const LoraRowsDev& rows = at->logit_rows ? lora_last_ : lora_all_;
  const LoraTargetDesc* table = lora_.column(at->layer, at->target);
  if (lora_stack_step_) {  // everything after the product (lora_stacked), on x as the product reads it
    if (norm_w != nullptr) throw EngineError(ErrorCode::internal, "lora_begin: a stacked step's x is normalised");
    lora_x_ = x;
    lora_ldx_ = ldx;
    return;
  }
  if (!lora_fork_on_) {
    if (lora_wide_step_)
      lora_shrink_wide(rows, table, lora_.slot_stride(), rank, x, norm_w, ldx, in, dt_, lora_scratch_, stream_);
    else
      lora_shrink(rows, table, lora_.slot_stride(), rank, x, norm_w, ldx, in, dt_, lora_scratch_, true, stream_);
    return;
  }
  // Forked: everything enqueued on the main stream so far (x, and the previous expand's reads of the scratch) is
  // done before the shrink starts; the product enqueued next runs beside it. (In a graph capture the events make
  // the fork and join edges.)
  check_cuda(cudaEventRecord(lora_fork_, stream_), "cudaEventRecord");
  check_cuda(cudaStreamWaitEvent(lora_stream_, lora_fork_, 0), "cudaStreamWaitEvent");
  // The forked stream's last kernel records the join programmatically (pdl.cuh's launch_ex), so that the kernel
  // after the product keeps its early start and waits for both in its pdl_wait (H200, batch 1: +7.7% a step against
  // +10.6% with an ordinary record; batch 64 unchanged, where a join's ~3.7 µs has another cause: bench/RESULTS.md).
  // (Wide steps' shrink is a plain launch: their join an ordinary record.)
  const bool prog = lora_join_prog_ && !lora_wide_step_;
  if (lora_wide_step_)
    lora_shrink_wide(rows, table, lora_.slot_stride(), rank, x, norm_w, ldx, in, dt_, lora_scratch_, lora_stream_);
  else
    lora_shrink(rows, table, lora_.slot_stride(), rank, x, norm_w, ldx, in, dt_, lora_scratch_, false, lora_stream_,
                prog && !lora_split_ ? lora_join_ : nullptr);
  if (lora_split_)  // the deltas too, still beside the product (the previous lora_add's reads came before the fork)
    lora_expand_delta(rows, table, lora_.slot_stride(), lora_scratch_, in, lora_norm_, config_.norm_eps, n,
                      lora_delta_.as<float>(), lora_delta_ld_, dt_, true, lora_stream_, prog ? lora_join_ : nullptr);
  if (!prog) check_cuda(cudaEventRecord(lora_join_, lora_stream_), "cudaEventRecord");
}

void CudaDecoder::lora_end(const LoraAt* at, void* y, bool y_f32, int64_t ldy, int64_t n, RowDelta* defer) {
  if (defer != nullptr) *defer = RowDelta{};
  if (at == nullptr || !lora_pending_) return;
  lora_pending_ = false;
  const LoraRowsDev& rows = at->logit_rows ? lora_last_ : lora_all_;
  const LoraTargetDesc* table = lora_.column(at->layer, at->target);
  if (lora_stack_step_) {
    lora_stacked(*at, rows, table, y, y_f32, ldy, n);
    return;
  }
  if (lora_fork_on_) check_cuda(cudaStreamWaitEvent(stream_, lora_join_, 0), "cudaStreamWaitEvent");
  if (lora_split_ && defer != nullptr) {  // the consumer adds them (kernels.h's RowDelta)
    *defer = RowDelta{lora_delta_.as<float>(), lora_delta_ld_, rows.grouped};
    return;
  }
  if (lora_split_) {
    lora_add(rows, lora_delta_.as<float>(), lora_delta_ld_, n, y, y_f32, ldy, dt_, true, stream_);
    return;
  }
  // Programmatic launch also after the join: the expand may start beside the product's tail (reading its
  // descriptors and B), and its wait returns once every kernel it depends on, the shrink's too, completed.
  if (lora_wide_step_)
    lora_expand_wide(rows, table, lora_.slot_stride(), lora_scratch_, lora_in_, lora_norm_, config_.norm_eps, n, y,
                     y_f32, ldy, dt_, true, stream_);
  else
    lora_expand(rows, table, lora_.slot_stride(), lora_scratch_, lora_in_, lora_norm_, config_.norm_eps, n, y, y_f32,
                ldy, dt_, true, stream_);
}

void CudaDecoder::lora_stacked(const LoraAt& at, const LoraRowsDev& rows, const LoraTargetDesc* table, void* y,
                               bool y_f32, int64_t ldy, int64_t n) {
  const int32_t rb = lora_.rank_bound(at.layer, at.target);
  const int64_t width = static_cast<int64_t>(rows.n_slots) * rb;
  if (width == 0 || rows.n == 0) return;
  if (lora_ldx_ != lora_in_)
    throw EngineError(ErrorCode::internal, "lora_stacked: x's row stride " + std::to_string(lora_ldx_) +
                                               " is not its width " + std::to_string(lora_in_));
  char* buf = lora_stack_buf_.as<char>();
  void *a_st = buf + lora_stack_at_[0], *b_st = buf + lora_stack_at_[1], *tm = buf + lora_stack_at_[3];
  float* t = reinterpret_cast<float*>(buf + lora_stack_at_[2]);
  lora_stack(table, lora_.slot_stride(), rows.slots, rows.n_slots, rb, lora_in_, n, a_st, b_st, dt_, stream_);
  gemm_->xwt(rows.n, width, lora_in_, lora_x_, a_st, dt_, t, true, width, false);
  lora_stack_mask(t, rows.block, rows.n, rows.n_slots, rb, tm, dt_, stream_);
  gemm_->xwt(rows.n, n, width, tm, b_st, dt_, y, y_f32, ldy, true);
}

}  // namespace engine::cuda
