// The CUDA paged attention (tensor-core kernel for head sizes up to 128, SIMT for 256) against a float64 reference
// on the host: MHA / GQA / MQA head layouts (groups 1, 3, 4, 8, 32), bf16 and fp16, decode rows and prefill chunks
// in one launch, scrambled blocks of 16 and 32 tokens, contexts from 1 to 1,000 positions, with and without the
// split of contexts into partitions, and peaked scores (the online softmax's rescaling across tiles and warps).
// Every pool slot no row may read holds NaN: a read past a context shows up in the output. Each launch runs twice
// on one workspace and must give the same values. Decode batches also run with this step's keys and values still in
// the qkv rows (AttnArgs::fresh: biased, rotated and written by attention() itself, inside the attention kernel for
// small batches): their pool slots start as NaN and must come out as the host's rotation rounded to the dtype
// (also with longrope's two tables, rows alternating between them).
// Sliding windows (a layer window, per-sequence caps, both; decode and prefill rows, one partition and split) and
// Gemma 2's soft-capped scores run the same way: a windowed sequence's block-table entries wholly before the first
// position any of its rows sees are -1 (released blocks) and the positions before it in its first block hold NaN,
// so a read of either fails the case.
// FP8 pools (--kv-cache-dtype fp8, AttnArgs::kv): the same cases with keys and values stored as e4m3 bytes of
// x / scale (NaN bytes where nothing may be read), with scales of 1 and others; the reference reads the host's
// decoded bytes times the scales, and this step's new keys / values must come out as the host's bytes (one e4m3
// step apart at most, for a value the device rounds on the other side of a rounding boundary).
// Decode launches with enough blocks (here num_sms 1 with new_last_only) take the decode kernel
// (kernels-attention-decode.cu: heads as the MMA's columns, e4m3 read from the staged bytes) for head sizes 64 and
// 128, groups 1 to 32 (two blocks per kv head past 8), windows, caps, the soft cap and both FP8 scalings among them,
// after the separate kernel wrote this step's keys / values (rotated, longrope, no rope).
// Launches of prompt rows with enough blocks (num_sms 1) take the prompt-rows kernel (kernels-attention-prefill.cu:
// each warp its own rows over every position) for head sizes 64 and 128, and run once more with the general
// kernel's row groups; the same cases.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "check.h"
#include "cuda-test-util.h"
#include "cuda/kernels.h"
#include "loading/safetensors.h"
#include "model/model-config.h"
#include "quant/fp8-matrix.h"

using namespace engine;
using cudatest::rel_err;

namespace {

// Values on a 1/64 grid in [-1, 1] are exact in bf16 and fp16 alike, so the host knows the device's inputs exactly.
uint16_t to_bits(float f, cuda::DType dt) { return dt == cuda::DType::bf16 ? f32_to_bf16(f) : f32_to_f16(f); }
float from_bits(uint16_t h, cuda::DType dt) { return dt == cuda::DType::bf16 ? bf16_to_f32(h) : f16_to_f32(h); }

struct Rng {
  uint64_t state;
  float grid() {  // k / 64, k in [-64, 64]
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<float>(static_cast<int>((state >> 33) % 129) - 64) / 64.0f;
  }
};

struct Seq {
  int32_t past, tokens;  // rows for positions past .. past + tokens - 1
  int32_t cap = 0;       // SequenceChunk::window: the sequence's window cap (0: none)
};

struct Case {
  int32_t n_heads, n_kv, hd, tpb;
  cuda::DType dt;
  std::vector<Seq> seqs;
  float q_scale;        // > 1: peaked scores
  int32_t window = 0;   // the layer's sliding window (AttnArgs::window)
  float softcap = 0;    // AttnArgs::softcap
  cuda::KvFormat kv{};  // e4m3 pools with these scales
};

// One pool as the device stores it: 16-bit elements of the case's dtype, or e4m3 bytes of x / scale. Starts as
// NaN everywhere.
struct HostPool {
  cuda::DType dt;
  bool fp8;
  float scale;
  std::vector<uint16_t> h;
  std::vector<uint8_t> b;
  HostPool(cuda::DType d, bool f8, float sc, size_t n) : dt(d), fp8(f8), scale(sc) {
    if (fp8) b.assign(n, 0x7f);  // e4m3fn's NaN
    else h.assign(n, 0x7fc0);    // a quiet NaN in bf16; in fp16 0x7fc0 is a NaN as well
  }
  size_t size() const { return fp8 ? b.size() : h.size(); }
  size_t bytes() const { return fp8 ? b.size() : h.size() * 2; }
  void* data() { return fp8 ? static_cast<void*>(b.data()) : static_cast<void*>(h.data()); }
  void set(size_t at, float x) {  // as the device rounds it (cpu/attention.cpp's write_kv for e4m3)
    if (fp8) b[at] = encode_e4m3(x * (1.0f / scale));
    else h[at] = to_bits(x, dt);
  }
  float value(size_t at) const { return fp8 ? decode_e4m3(b[at]) * scale : from_bits(h[at], dt); }
  void set_nan(size_t at) {
    if (fp8) b[at] = 0x7f;
    else h[at] = 0x7fc0;
  }
  bool same(size_t at, const HostPool& o) const { return fp8 ? b[at] == o.b[at] : h[at] == o.h[at]; }
  void copy_from(size_t at, const HostPool& o) {
    if (fp8) b[at] = o.b[at];
    else h[at] = o.h[at];
  }
};

// Where this step's keys and values are: already in the pools, or in the qkv rows with rotation and bias (with
// one table, or longrope's two, odd rows taking the long one), or in the qkv rows with a bias and no rotation
// (learned position embeddings).
enum class Fresh { none, rope, longrope, plain };

// The first position a row at `ctx` sees (model-config.h's effective_window of the layer's window and the cap).
int32_t row_lo(const Case& c, int32_t ctx, int32_t cap) {
  const int32_t w = effective_window(c.window, cap);
  return w > 0 ? std::max(0, ctx - w) : 0;
}

// new_last_only: the launch is told each row's last position is the only one written this step (decode), which
// lets the kernel read the older keys / values before its wait and take the wide block for small batches.
// wide: the rows' groups for the prompt-rows kernel are planned too (AttnArgs::wide_groups), so launches with
// enough blocks take it (false: the general kernel's row groups serve the prompt rows).
void run_case(const Case& c, int num_sms, const char* split_label, bool new_last_only = false,
              Fresh fresh = Fresh::none, bool wide = true) {
  const int64_t hd = c.hd, kv_dim = static_cast<int64_t>(c.n_kv) * hd;
  const int64_t q_stride = static_cast<int64_t>(c.n_heads) * hd + 2 * kv_dim;  // q, k, v as the decoder's qkv rows
  const int64_t out_stride = static_cast<int64_t>(c.n_heads) * hd + 8;         // 8 spare columns must stay untouched
  Rng rng{static_cast<uint64_t>(c.hd * 131 + c.n_heads * 7 + c.n_kv)};

  // Blocks: each sequence gets the blocks its last position needs, handed out in a scrambled order, except those
  // wholly before the first position its first row sees (the rows' windows start in order): -1 in its table.
  auto first_block = [&](const Seq& s) { return row_lo(c, s.past + 1, s.cap) / c.tpb; };
  int32_t n_blocks = 0;
  for (const Seq& s : c.seqs) n_blocks += (s.past + s.tokens + c.tpb - 1) / c.tpb - first_block(s);
  n_blocks += 3;  // spare blocks nobody owns
  std::vector<int32_t> order(static_cast<size_t>(n_blocks));
  for (int32_t i = 0; i < n_blocks; ++i) order[static_cast<size_t>(i)] = (i * 7 + 5) % n_blocks;
  if (n_blocks % 7 == 0)
    for (int32_t i = 0; i < n_blocks; ++i) order[static_cast<size_t>(i)] = n_blocks - 1 - i;
  const int64_t block_elems = kv_dim * c.tpb;
  const size_t pool_elems = static_cast<size_t>(n_blocks * block_elems);
  HostPool kpool(c.dt, c.kv.fp8, c.kv.k_scale, pool_elems), vpool(c.dt, c.kv.fp8, c.kv.v_scale, pool_elems);
  std::vector<float> kref(pool_elems, NAN), vref(pool_elems, NAN);

  std::vector<int32_t> tables;
  std::vector<cuda::AttnRow> rows;
  std::vector<float> q;
  int32_t next_block = 0, max_ctx = 0;
  for (const Seq& s : c.seqs) {
    const int32_t table_at = static_cast<int32_t>(tables.size());
    const int32_t used = (s.past + s.tokens + c.tpb - 1) / c.tpb;
    for (int32_t b = 0; b < used; ++b)
      tables.push_back(b < first_block(s) ? -1 : order[static_cast<size_t>(next_block++)]);
    // Positions before the first row's window start stay NaN (in blocks still held) or have no block at all.
    for (int32_t p = row_lo(c, s.past + 1, s.cap); p < s.past + s.tokens; ++p)
      for (int32_t h = 0; h < c.n_kv; ++h)
        for (int64_t d = 0; d < hd; ++d) {
          const int64_t at = static_cast<int64_t>(tables[static_cast<size_t>(table_at + p / c.tpb)]) * block_elems +
                             (static_cast<int64_t>(h) * c.tpb + p % c.tpb) * hd + d;
          const float kv = rng.grid(), vv = rng.grid();
          kpool.set(static_cast<size_t>(at), kv);
          vpool.set(static_cast<size_t>(at), vv);
          kref[static_cast<size_t>(at)] = kpool.value(static_cast<size_t>(at));
          vref[static_cast<size_t>(at)] = vpool.value(static_cast<size_t>(at));
        }
    for (int32_t i = 0; i < s.tokens; ++i) {
      const int32_t row = static_cast<int32_t>(rows.size());
      rows.push_back(cuda::AttnRow{row, s.past + i + 1, table_at, s.cap});
      max_ctx = std::max(max_ctx, s.past + i + 1);
      for (int64_t j = 0; j < q_stride; ++j) q.push_back(j < c.n_heads * hd ? rng.grid() * c.q_scale : NAN);
    }
  }
  const int32_t n_rows = static_cast<int32_t>(rows.size());

  // Fresh: each row's own (last) position leaves the pools (NaN) for raw k, v in its qkv row; q, k, v get a bias and
  // (Fresh::rope) the rotation by the row's position, as the CPU backend computes it. qref: the q the reference uses.
  std::vector<float> qref = q, bias, inv_freq;
  std::vector<uint8_t> use_long;  // Fresh::longrope: odd rows take the long table (inv_freq's second half)
  std::vector<int32_t> positions;
  std::vector<int64_t> kv_dst;
  std::vector<size_t> new_slots;  // pool elements this launch must write
  HostPool want_k = kpool, want_v = vpool;  // the pools after the launch
  if (fresh != Fresh::none) {
    const int64_t q_dim = static_cast<int64_t>(c.n_heads) * hd, half = hd / 2;
    for (int64_t j = 0; j < q_stride; ++j) bias.push_back(rng.grid() / 4);
    const bool rotate = fresh == Fresh::rope || fresh == Fresh::longrope;
    if (rotate)
      for (int64_t i = 0; i < half; ++i)
        inv_freq.push_back(1.0f / std::pow(500000.0f, static_cast<float>(2 * i) / static_cast<float>(hd)));
    if (fresh == Fresh::longrope)  // long factors from 1 to about 8 over the frequencies
      for (int64_t i = 0; i < half; ++i)
        inv_freq.push_back(inv_freq[static_cast<size_t>(i)] / (1.0f + 7.0f * static_cast<float>(i) / half));
    for (int32_t r = 0; r < n_rows; ++r) {
      const cuda::AttnRow& row = rows[static_cast<size_t>(r)];
      const int32_t p = row.ctx - 1;
      positions.push_back(p);
      use_long.push_back(fresh == Fresh::longrope && r % 2 == 1 ? 1 : 0);
      const float* inv = inv_freq.data() + (use_long.back() ? half : 0);
      kv_dst.push_back(static_cast<int64_t>(tables[static_cast<size_t>(row.table + p / c.tpb)]) * block_elems +
                       static_cast<int64_t>(p % c.tpb) * hd);
      float* in = &q[static_cast<size_t>(r * q_stride)];
      for (int64_t j = q_dim; j < q_stride; ++j) in[j] = rng.grid();
      std::vector<float> x(static_cast<size_t>(q_stride));
      for (int64_t j = 0; j < q_stride; ++j) x[static_cast<size_t>(j)] = in[j] + bias[static_cast<size_t>(j)];
      if (rotate)
        for (int64_t h = 0; h < c.n_heads + c.n_kv; ++h)
          for (int64_t i = 0; i < half; ++i) {
            const float angle = static_cast<float>(p) * inv[i];
            const float cs = static_cast<float>(std::cos(static_cast<double>(angle)));
            const float sn = static_cast<float>(std::sin(static_cast<double>(angle)));
            float& a = x[static_cast<size_t>(h * hd + i)];
            float& b = x[static_cast<size_t>(h * hd + i + half)];
            const float ra = a * cs - b * sn, rb = b * cs + a * sn;
            a = ra;
            b = rb;
          }
      for (int64_t j = 0; j < q_dim; ++j) qref[static_cast<size_t>(r * q_stride + j)] = x[static_cast<size_t>(j)];
      for (int32_t h = 0; h < c.n_kv; ++h)
        for (int64_t d = 0; d < hd; ++d) {
          const size_t at = static_cast<size_t>(kv_dst.back() + static_cast<int64_t>(h) * c.tpb * hd + d);
          want_k.set(at, x[static_cast<size_t>(q_dim + h * hd + d)]);
          want_v.set(at, x[static_cast<size_t>(q_dim + c.n_kv * hd + h * hd + d)]);
          kref[at] = want_k.value(at);
          vref[at] = want_v.value(at);
          kpool.set_nan(at);
          vpool.set_nan(at);
          new_slots.push_back(at);
        }
    }
  }
  std::vector<cuda::AttnGroup> groups(rows.size());
  const int32_t n_groups = cuda::group_attention_rows(
      rows.data(), n_rows, cuda::attention_rows_per_group(c.n_heads, c.n_kv, c.hd), groups.data());
  std::vector<cuda::AttnGroup> wide_groups(rows.size());
  const int32_t per_wide = wide ? cuda::attention_prefill_rows_per_group(c.n_heads, c.n_kv, c.hd) : 0;
  const int32_t n_wide = per_wide > 0 ? cuda::group_attention_rows(rows.data(), n_rows, per_wide, wide_groups.data()) : 0;

  // Reference: float64 softmax over each row's own window of its context, of soft-capped scores with a cap.
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> want(static_cast<size_t>(n_rows) * c.n_heads * hd);
  for (int32_t r = 0; r < n_rows; ++r) {
    const cuda::AttnRow& row = rows[static_cast<size_t>(r)];
    for (int32_t h = 0; h < c.n_heads; ++h) {
      const int32_t kvh = h / (c.n_heads / c.n_kv);
      const int32_t lo = row_lo(c, row.ctx, row.window);
      std::vector<double> w(static_cast<size_t>(row.ctx - lo));  // w[p - lo] for positions [lo, ctx)
      double mx = -INFINITY;
      auto slot = [&](int32_t p) {
        return static_cast<int64_t>(tables[static_cast<size_t>(row.table + p / c.tpb)]) * block_elems +
               (static_cast<int64_t>(kvh) * c.tpb + p % c.tpb) * hd;
      };
      for (int32_t p = lo; p < row.ctx; ++p) {
        double dot = 0;
        for (int64_t d = 0; d < hd; ++d)
          dot += static_cast<double>(qref[static_cast<size_t>(row.q_row * q_stride + h * hd + d)]) *
                 kref[static_cast<size_t>(slot(p) + d)];
        double x = dot * scale;
        if (c.softcap > 0) x = c.softcap * std::tanh(x / c.softcap);
        w[static_cast<size_t>(p - lo)] = x;
        mx = std::max(mx, x);
      }
      double total = 0;
      for (double& x : w) total += (x = std::exp(x - mx));
      for (int64_t d = 0; d < hd; ++d) {
        double acc = 0;
        for (int32_t p = lo; p < row.ctx; ++p)
          acc += w[static_cast<size_t>(p - lo)] * vref[static_cast<size_t>(slot(p) + d)];
        want[static_cast<size_t>((static_cast<int64_t>(r) * c.n_heads + h) * hd + d)] = static_cast<float>(acc / total);
      }
    }
  }

  void *d_q, *d_k, *d_v, *d_rows, *d_groups, *d_tables, *d_out, *d_ws = nullptr, *d_wide = nullptr;
  void *d_bias = nullptr, *d_inv = nullptr, *d_pos = nullptr, *d_dst = nullptr, *d_long = nullptr;
  auto upload = [](void** d, const void* h, size_t bytes) {
    if (bytes == 0) return;
    cudaMalloc(d, bytes);
    cudaMemcpy(*d, h, bytes, cudaMemcpyHostToDevice);
  };
  upload(&d_wide, wide_groups.data(), static_cast<size_t>(n_wide) * sizeof(cuda::AttnGroup));
  upload(&d_bias, bias.data(), bias.size() * 4);
  upload(&d_inv, inv_freq.data(), inv_freq.size() * 4);
  upload(&d_pos, positions.data(), positions.size() * 4);
  upload(&d_dst, kv_dst.data(), kv_dst.size() * 8);
  if (fresh == Fresh::longrope) upload(&d_long, use_long.data(), use_long.size());
  cudaMalloc(&d_q, q.size() * 4);
  cudaMalloc(&d_k, kpool.bytes());
  cudaMalloc(&d_v, vpool.bytes());
  cudaMalloc(&d_rows, rows.size() * sizeof(cuda::AttnRow));
  cudaMalloc(&d_groups, static_cast<size_t>(n_groups) * sizeof(cuda::AttnGroup));
  cudaMalloc(&d_tables, tables.size() * 4);
  cudaMalloc(&d_out, static_cast<size_t>(n_rows * out_stride) * 2);
  cudaMemcpy(d_q, q.data(), q.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(d_k, kpool.data(), kpool.bytes(), cudaMemcpyHostToDevice);
  cudaMemcpy(d_v, vpool.data(), vpool.bytes(), cudaMemcpyHostToDevice);
  cudaMemcpy(d_rows, rows.data(), rows.size() * sizeof(cuda::AttnRow), cudaMemcpyHostToDevice);
  cudaMemcpy(d_groups, groups.data(), static_cast<size_t>(n_groups) * sizeof(cuda::AttnGroup), cudaMemcpyHostToDevice);
  cudaMemcpy(d_tables, tables.data(), tables.size() * 4, cudaMemcpyHostToDevice);
  cudaMemset(d_out, 0x5a, static_cast<size_t>(n_rows * out_stride) * 2);

  cuda::AttnArgs a{};
  a.q = static_cast<float*>(d_q);
  a.q_stride = q_stride;
  a.k_pool = d_k;
  a.v_pool = d_v;
  a.dt = c.dt;
  a.kv = c.kv;
  a.rows = static_cast<const cuda::AttnRow*>(d_rows);
  a.groups = static_cast<const cuda::AttnGroup*>(d_groups);
  a.block_tables = static_cast<const int32_t*>(d_tables);
  a.n_rows = n_rows;
  a.n_groups = n_groups;
  a.wide_groups = static_cast<const cuda::AttnGroup*>(d_wide);
  a.n_wide_groups = n_wide;
  a.n_heads = c.n_heads;
  a.n_kv = c.n_kv;
  a.head_dim = c.hd;
  a.tokens_per_block = c.tpb;
  a.scale = scale;
  a.softcap = c.softcap;
  a.window = c.window;
  a.out = d_out;
  a.out_stride = out_stride;
  a.max_ctx = max_ctx;
  a.new_last_only = new_last_only;
  if (fresh != Fresh::none)
    a.fresh = cuda::NewKv{n_rows, static_cast<const float*>(d_bias), static_cast<const int32_t*>(d_pos),
                          static_cast<const float*>(d_inv), static_cast<const int64_t*>(d_dst),
                          static_cast<const uint8_t*>(d_long)};
  const size_t ws = cuda::attention_workspace_floats(a, num_sms);
  const size_t bound = cuda::attention_workspace_bound(c.n_heads, c.n_kv, c.hd, num_sms);
  if (ws > 0) {
    cudaMalloc(&d_ws, ws * 4);
    cudaMemset(d_ws, 0, ws * 4);
  }
  // Twice on the same workspace: the same values again (nothing depends on what a launch leaves behind).
  std::string error;
  std::vector<uint16_t> out(static_cast<size_t>(n_rows * out_stride)), again(out.size());
  try {
    for (std::vector<uint16_t>* dst : {&out, &again}) {
      cudaMemcpy(d_q, q.data(), q.size() * 4, cudaMemcpyHostToDevice);  // (rope_and_write_kv rotates q in place)
      cuda::attention(a, static_cast<float*>(d_ws), num_sms, nullptr);
      const cudaError_t e = cudaDeviceSynchronize();
      if (e != cudaSuccess) throw std::runtime_error(cudaGetErrorString(e));
      cudaMemcpy(dst->data(), d_out, dst->size() * 2, cudaMemcpyDeviceToHost);
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  CHECK_MSG(out == again, "attention heads %d/%d hd %d %s: a second launch gave other values", c.n_heads, c.n_kv,
            c.hd, split_label);
  // The pools afterwards: the new slots as the host rounded them (one unit in the last place apart at most: the
  // device may fuse a multiply-add the host rounds twice), every other slot as it was.
  HostPool kafter = kpool, vafter = vpool;
  cudaMemcpy(kafter.data(), d_k, kafter.bytes(), cudaMemcpyDeviceToHost);
  cudaMemcpy(vafter.data(), d_v, vafter.bytes(), cudaMemcpyDeviceToHost);
  size_t off_slots = 0, far_new = 0;
  // relative, with room for rounding: e4m3 steps are 1/8 apart (its 3-bit mantissa) at most
  const float ulp = c.kv.fp8 ? 1.0f / 8 : c.dt == cuda::DType::bf16 ? 1.0f / 128 : 1.0f / 1024;
  auto far = [&](const HostPool& x, const HostPool& y, size_t at) {
    const float fx = x.value(at), fy = y.value(at);
    return !(std::fabs(fx - fy) <= ulp * std::fmax(std::fabs(fx), std::fabs(fy)) + 1e-6f);
  };
  for (size_t at : new_slots) {
    far_new += far(kafter, want_k, at) || far(vafter, want_v, at);
    kafter.copy_from(at, want_k);
    vafter.copy_from(at, want_v);
  }
  for (size_t i = 0; i < kafter.size(); ++i) off_slots += !kafter.same(i, want_k) || !vafter.same(i, want_v);
  CHECK_MSG(far_new == 0, "attention heads %d/%d hd %d %s: %zu new key / value slots differ from the host's", c.n_heads,
            c.n_kv, c.hd, split_label, far_new);
  CHECK_MSG(off_slots == 0, "attention heads %d/%d hd %d %s: %zu pool slots changed that are not this step's",
            c.n_heads, c.n_kv, c.hd, split_label, off_slots);
  for (void* p : {d_q, d_k, d_v, d_rows, d_groups, d_tables, d_out, d_ws, d_bias, d_inv, d_pos, d_dst, d_long, d_wide})
    cudaFree(p);

  std::vector<float> got(want.size());
  bool spare_kept = true;
  for (int32_t r = 0; r < n_rows; ++r) {
    for (int64_t j = 0; j < c.n_heads * hd; ++j)
      got[static_cast<size_t>(r * c.n_heads * hd + j)] = from_bits(out[static_cast<size_t>(r * out_stride + j)], c.dt);
    for (int64_t j = c.n_heads * hd; j < out_stride; ++j)
      spare_kept = spare_kept && out[static_cast<size_t>(r * out_stride + j)] == 0x5a5au;
  }
  const double err = error.empty() ? rel_err(got.data(), want.data(), got.size()) : INFINITY;
  std::printf("attention %s%s heads %d/%d hd %d tpb %d rows %d groups %d q x%.0f window %d softcap %.0f %s: rel err "
              "%.2e%s%s\n",
              c.dt == cuda::DType::bf16 ? "bf16" : "fp16", c.kv.fp8 ? " fp8-kv" : "", c.n_heads, c.n_kv, c.hd, c.tpb, n_rows, n_groups,
              c.q_scale, c.window, c.softcap, split_label, err, error.empty() ? "" : " error: ", error.c_str());
  CHECK_MSG(error.empty(), "attention heads %d/%d hd %d: %s", c.n_heads, c.n_kv, c.hd, error.c_str());
  CHECK_MSG(err < 1e-2, "attention heads %d/%d hd %d %s: rel err %.3e", c.n_heads, c.n_kv, c.hd, split_label, err);
  CHECK_MSG(spare_kept, "attention heads %d/%d hd %d wrote past its rows' heads", c.n_heads, c.n_kv, c.hd);
  CHECK_MSG(ws <= bound, "attention workspace %zu floats over its bound %zu", ws, bound);
}

}  // namespace

TEST_MAIN({
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) != cudaSuccess || sms < 1) {
    return check::skip("no GPU visible");
  } else {
    // Decode rows of several lengths, a prefill chunk from scratch, a chunked-context continuation, a short chunk.
    const std::vector<Seq> mixed = {{0, 1}, {36, 1}, {299, 1}, {999, 1}, {0, 70}, {130, 5}, {64, 33}};
    const std::vector<Seq> decode = {{0, 1}, {17, 1}, {127, 1}, {128, 1}, {511, 1}};
    // Decode rows within the wide block's unsplit reach (<= 256 positions), rows long enough for partitions of
    // several tiles, and one long row alone (many partitions).
    const std::vector<Seq> decode_short = {{0, 1}, {17, 1}, {127, 1}, {128, 1}, {255, 1}};
    const std::vector<Seq> decode_long = {{1999, 1}, {1500, 1}, {1024, 1}, {700, 1}, {0, 1}, {300, 1}, {1800, 1}, {999, 1}};
    const std::vector<Seq> decode_one = {{2999, 1}};
    // A larger decode batch: 24 rows of 1 to ~600 positions (tiles cut anywhere, warps past the context).
    std::vector<Seq> decode_batch;
    for (int32_t i = 0; i < 24; ++i) decode_batch.push_back(Seq{(i * 97 + i * i * 13) % 600, 1});
    std::vector<Case> cases;
    for (cuda::DType dt : {cuda::DType::bf16, cuda::DType::f16}) {
      cases.push_back(Case{32, 8, 128, 32, dt, mixed, 1});   // Llama-3-8B's layout
      cases.push_back(Case{32, 8, 128, 16, dt, decode, 4});  // peaked
      cases.push_back(Case{4, 4, 64, 16, dt, mixed, 1});     // MHA (GPT-2-like)
      cases.push_back(Case{12, 4, 32, 32, dt, mixed, 2});    // group 3: one head per block
      cases.push_back(Case{16, 2, 16, 16, dt, mixed, 1});    // group 8
      cases.push_back(Case{32, 1, 64, 16, dt, decode, 1});   // MQA: group 32, two blocks per kv head
      cases.push_back(Case{8, 2, 256, 16, dt, mixed, 1});    // head 256: the SIMT kernel
      cases.push_back(Case{32, 8, 128, 16, dt, decode_short, 2});
      cases.push_back(Case{8, 8, 64, 32, dt, decode_short, 1});
      cases.push_back(Case{32, 8, 128, 64, dt, decode_long, 1});
      cases.push_back(Case{32, 8, 128, 16, dt, decode_one, 2});
      cases.push_back(Case{8, 8, 64, 16, dt, decode_long, 1});
      cases.push_back(Case{32, 8, 128, 16, dt, decode_batch, 2});
      cases.push_back(Case{32, 4, 64, 32, dt, decode_batch, 1});  // group 8: every MMA column a head
    }
    // Windows: decode rows with and without caps of their own (some narrower than the layer's window, some wider),
    // prefill chunks whose tile rows start their windows at different positions (a long capped chunk crosses
    // partition boundaries inside its row groups), one long windowed row split into partitions of its window.
    const std::vector<Seq> win_decode = {{0, 1},       {17, 1, 8},       {127, 1},    {300, 1, 100},
                                         {999, 1},     {2999, 1, 64},    {1500, 1, 1000}, {255, 1, 200}};
    const std::vector<Seq> win_prefill = {{0, 70},  {130, 5, 50}, {64, 33}, {400, 40, 17},
                                          {0, 300, 20}, {999, 1}, {2000, 1, 300}};
    const std::vector<Seq> win_one = {{2999, 1}};
    std::vector<Case> windowed;
    for (cuda::DType dt : {cuda::DType::bf16, cuda::DType::f16}) {
      windowed.push_back(Case{32, 8, 128, 16, dt, win_decode, 1, 256});    // layer window and caps
      windowed.push_back(Case{32, 8, 128, 32, dt, win_prefill, 1, 48});    // windows narrower than the chunks
      windowed.push_back(Case{32, 8, 128, 16, dt, win_prefill, 1, 100});   // split from the window
      windowed.push_back(Case{12, 4, 32, 16, dt, win_prefill, 2, 0});      // caps only, one head per block
      windowed.push_back(Case{16, 2, 16, 16, dt, win_decode, 1, 100});
      windowed.push_back(Case{4, 4, 64, 16, dt, win_prefill, 1, 1000});    // a window wider than most contexts
      windowed.push_back(Case{8, 8, 64, 32, dt, decode_short, 1, 100});    // the wide block, unsplit
      windowed.push_back(Case{32, 8, 128, 16, dt, win_one, 2, 700});
      windowed.push_back(Case{32, 8, 128, 64, dt, decode_long, 1, 500});
      windowed.push_back(Case{8, 2, 256, 16, dt, win_prefill, 1, 48});     // the SIMT kernel
      windowed.push_back(Case{8, 2, 256, 16, dt, win_decode, 1, 256, 30}); // SIMT, window and soft cap
      // Soft-capped scores (peaked, so that the cap bites), alone and with a window.
      windowed.push_back(Case{32, 8, 128, 16, dt, decode, 4, 0, 5});
      windowed.push_back(Case{32, 8, 128, 32, dt, mixed, 4, 0, 5});
      windowed.push_back(Case{32, 8, 128, 16, dt, win_prefill, 4, 48, 5});
      windowed.push_back(Case{8, 2, 256, 16, dt, mixed, 4, 0, 5});
    }
    for (const Case& c : windowed) cases.push_back(c);
    // FP8 pools: the tensor-core kernel (4 and 8 warps, head sizes 16 to 128, one partition and split), the SIMT
    // kernel (head size 256), windows and the soft cap, with scales of 1 and with others.
    const cuda::KvFormat f8_one{true, 1.0f, 1.0f}, f8_scaled{true, 0.02f, 0.05f};
    for (cuda::DType dt : {cuda::DType::bf16, cuda::DType::f16}) {
      cases.push_back(Case{32, 8, 128, 32, dt, mixed, 1, 0, 0, f8_one});
      cases.push_back(Case{32, 8, 128, 16, dt, decode, 4, 0, 0, f8_scaled});
      cases.push_back(Case{32, 8, 128, 16, dt, decode_short, 2, 0, 0, f8_scaled});
      cases.push_back(Case{32, 8, 128, 64, dt, decode_long, 1, 0, 0, f8_one});
      cases.push_back(Case{8, 8, 64, 32, dt, decode_short, 1, 0, 0, f8_scaled});
      cases.push_back(Case{12, 4, 32, 32, dt, mixed, 2, 0, 0, f8_scaled});
      cases.push_back(Case{16, 2, 16, 16, dt, mixed, 1, 0, 0, f8_scaled});
      cases.push_back(Case{16, 2, 16, 16, dt, decode_short, 1, 0, 0, f8_one});
      cases.push_back(Case{8, 2, 256, 16, dt, mixed, 1, 0, 0, f8_scaled});
      cases.push_back(Case{8, 2, 256, 16, dt, decode, 1, 0, 0, f8_one});
      cases.push_back(Case{32, 8, 128, 16, dt, win_decode, 1, 256, 0, f8_scaled});
      cases.push_back(Case{32, 8, 128, 32, dt, win_prefill, 4, 48, 5, f8_scaled});
      cases.push_back(Case{8, 2, 256, 16, dt, win_decode, 1, 256, 30, f8_scaled});
      cases.push_back(Case{32, 8, 128, 16, dt, decode_batch, 2, 0, 0, f8_scaled});
      cases.push_back(Case{32, 4, 64, 32, dt, decode_batch, 1, 0, 5, f8_one});
      cases.push_back(Case{32, 1, 64, 16, dt, decode, 1, 0, 0, f8_scaled});  // MQA: two blocks per kv head
    }
    for (const Case& c : cases) {
      const bool window = c.window > 0 || c.softcap > 0 || std::any_of(c.seqs.begin(), c.seqs.end(),
                                                                       [](const Seq& q) { return q.cap > 0; });
      run_case(c, 1, "one partition");  // num_sms 1: enough blocks, no split (prompt rows: the prompt-rows kernel)
      run_case(c, 1, "one partition, general kernel", false, Fresh::none, false);
      run_case(c, sms, "split when few blocks");
      // (num_sms only plans the split: 1,000 cuts every context into many short partitions, so that windows and
      // row groups start inside partitions and cross their boundaries)
      if (window) run_case(c, 1000, "split into many partitions");
      bool decode_only = true;
      for (const Seq& q : c.seqs) decode_only = decode_only && q.tokens == 1;
      if (decode_only) {
        run_case(c, 1, "one partition, new_last_only", true);
        run_case(c, sms, "split, new_last_only", true);
        // This step's keys / values from the qkv rows: through rope_and_write_kv (num_sms 1: large-batch kernels),
        // and inside the attention kernel (small batch), rotated or not.
        run_case(c, 1, "one partition, new k/v + rope", true, Fresh::rope);
        run_case(c, sms, "split, new k/v + rope", true, Fresh::rope);
        run_case(c, sms, "split, new k/v, no rope", true, Fresh::plain);
        run_case(c, 1, "one partition, new k/v, no rope", true, Fresh::plain);
        run_case(c, 1, "one partition, new k/v + longrope", true, Fresh::longrope);
        run_case(c, sms, "split, new k/v + longrope", true, Fresh::longrope);
        if (window) run_case(c, 1000, "many partitions, new k/v + rope", true, Fresh::rope);
      }
    }
  }
})
