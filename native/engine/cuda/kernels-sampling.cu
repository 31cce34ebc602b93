// Greedy sampling on the GPU: per row, the argmax (lowest id among equal maxima, as the host sampler) and its
// log-softmax, so a greedy decode step copies two numbers per sequence to the host instead of a vocab of logits.
#include <cfloat>

#include "cuda/cuda-check.h"
#include "cuda/kernels.h"
#include "cuda/pdl.cuh"

namespace engine::cuda {
namespace {

constexpr int kThreads = 1024;

// (value, index) max with the lower index winning ties; NaN never wins (the host sampler turns NaN into -inf).
__device__ __forceinline__ void better(float& v, int& i, float ov, int oi) {
  if (ov != ov) return;
  if (v != v || ov > v || (ov == v && oi < i)) {
    v = ov;
    i = oi;
  }
}

__global__ void __launch_bounds__(kThreads) greedy_kernel(const float* logits, const int32_t* rows_idx, int64_t vocab,
                                                          int32_t* token, float* log_prob) {
  pdl_enter();  // pdl.cuh
  __shared__ float sv[32];
  __shared__ int si[32];
  __shared__ float ssum[32];
  const float* row = logits + static_cast<int64_t>(rows_idx[blockIdx.x]) * vocab;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float v = -INFINITY;
  int idx = INT_MAX;
  for (int64_t t = threadIdx.x; t < vocab; t += kThreads) better(v, idx, row[t], static_cast<int>(t));
  for (int o = 16; o > 0; o >>= 1) better(v, idx, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, idx, o));
  if (lane == 0) {
    sv[warp] = v;
    si[warp] = idx;
  }
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / 32 ? sv[lane] : -INFINITY;
    idx = lane < kThreads / 32 ? si[lane] : INT_MAX;
    for (int o = 16; o > 0; o >>= 1) better(v, idx, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, idx, o));
    if (lane == 0) {
      sv[0] = v;
      si[0] = idx;
    }
  }
  __syncthreads();
  const float mx = sv[0];
  const int best = si[0] == INT_MAX ? 0 : si[0];
  if (mx == -INFINITY) {  // every entry -inf or NaN: the host sampler returns token 0 (or the first) with -inf
    if (threadIdx.x == 0) {
      token[blockIdx.x] = best;
      log_prob[blockIdx.x] = -INFINITY;
    }
    return;
  }
  float sum = 0;
  for (int64_t t = threadIdx.x; t < vocab; t += kThreads) {
    const float x = row[t];
    if (x == x) sum += expf(x - mx);
  }
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) ssum[warp] = sum;
  __syncthreads();
  if (threadIdx.x == 0) {
    float total = 0;
    for (int w = 0; w < kThreads / 32; ++w) total += ssum[w];
    token[blockIdx.x] = best;
    log_prob[blockIdx.x] = -logf(total);
  }
}

}  // namespace

void greedy_sample(const float* logits, const int32_t* rows_idx, int32_t n, int64_t vocab, int32_t* token,
                   float* log_prob, cudaStream_t s) {
  if (n == 0) return;
  launch_pdl(greedy_kernel, dim3(static_cast<unsigned>(n)), dim3(kThreads), s, logits, rows_idx, vocab, token, log_prob);
  check_launch("greedy_sample");
}

}  // namespace engine::cuda

// ---- sampling: the host sampler's distribution and draw, on the GPU ----
// One block per row. The row is rewritten in place (NaN -> -inf, penalties, 1 / temperature), then the few
// quantities the host sampler derives by sorting are found by searches over the order-preserving integer key of
// the values (higher value first, lower id first among equal values, as sampler.cpp's `better`):
//   top-k: the k-th best element (key + id), by binary search on the key over counts, ties by id;
//   top-p: the first best-first element whose cumulative mass reaches top_p, the same way over masses;
//   draw:  the first element whose cumulative mass exceeds u * kept mass, best-first when top-k or top-p limited
//          the set, in token order otherwise (the host walks the unsorted row then).
// Masses are exp(x - max) in fp32 summed in double; the uniform is sampler.cpp's counter_uniform(seed, step).
namespace engine::cuda {
namespace {

__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
__device__ __forceinline__ double counter_uniform_dev(uint64_t seed, uint64_t step) {
  const uint64_t h = splitmix64(splitmix64(seed) ^ splitmix64(step ^ 0xD1B54A32D192ED03ull));
  return static_cast<double>(h >> 11) * (1.0 / 9007199254740992.0);
}
// Order-preserving key of a float (NaN already removed): a > b  <=>  key(a) > key(b), and -0 and +0 share one key
// (they are equal values, which the host orders by id).
__device__ __forceinline__ uint32_t order_key(float v) {
  const uint32_t u = __float_as_uint(v == 0.0f ? 0.0f : v);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Block-wide sums (1024 threads); every thread gets the result.
template <typename V>
__device__ V block_total(V v, V* scratch /* [32] */) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  V t = lane < (kThreads >> 5) ? scratch[lane] : V(0);
  for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  return t;
}

// The elements still in play: key > cut_key, or key == cut_key with id <= cut_id (cut_key 0: everything).
struct Cut {
  uint32_t key;
  int64_t id;
  __device__ bool keeps(uint32_t k, int64_t i) const { return k > key || (k == key && i <= id); }
};

struct Shared {
  double dsum[32];
  unsigned long long csum[32];
  float fmax[32];
  int imax[32];
  int found;
};

// Best-first search: the element at which the running total of w(x) over the kept set, taken best-first, first
// satisfies `reached(total)` (monotone in total). w = 1 counts elements, w = mass sums masses. Returns its key and id
// and the total before its tie group (`above`).
template <bool kMass>
__device__ Cut find_best_first(const float* row, int64_t vocab, const Cut& in, float mx, double target, bool strict,
                               Shared& sh) {
  auto weight = [&](float x) -> double { return kMass ? static_cast<double>(__expf(x - mx)) : 1.0; };
  auto reached = [&](double t) { return strict ? t > target : t >= target; };
  // The largest key K whose set {kept, key >= K} has reached the target: binary search over 32 bits.
  uint32_t lo = 0, hi = 0xFFFFFFFFu;  // invariant: reached at lo (key 0 keeps everything kept), answer in [lo, hi]
  while (lo < hi) {
    const uint32_t mid = lo + static_cast<uint32_t>((static_cast<uint64_t>(hi) - lo + 1) / 2);
    double t = 0;
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      const float x = row[i];
      const uint32_t k = order_key(x);
      if (k >= mid && in.keeps(k, i)) t += weight(x);
    }
    t = block_total(t, sh.dsum);
    if (reached(t)) lo = mid; else hi = mid - 1;
  }
  const uint32_t key = lo;
  double above = 0;
  float tie_w = 0;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    const float x = row[i];
    const uint32_t k = order_key(x);
    if (k > key && in.keeps(k, i)) above += weight(x);
    if (k == key) tie_w = kMass ? __expf(x - mx) : 1.0f;
  }
  above = block_total(above, sh.dsum);
  // Ties at `key` in id order: the n-th kept one where above + n * w first reaches the target.
  __shared__ float tw;
  if (threadIdx.x == 0) tw = 0;
  __syncthreads();
  if (tie_w != 0) tw = tie_w;  // every tie has the same value, so the same weight
  __syncthreads();
  const double w = tw;
  int64_t need = 1;
  if (w > 0) {
    double t = above + w;
    while (!reached(t) && need < vocab) { ++need; t += w; }
  }
  // The need-th kept element with this key, scanning ids in order, 1024 at a time.
  if (threadIdx.x == 0) sh.found = -1;
  int64_t seen = 0, found = -1;
  for (int64_t base = 0; base < vocab && found < 0; base += kThreads) {
    const int64_t i = base + threadIdx.x;
    const bool hit = i < vocab && order_key(row[i]) == key && in.keeps(key, i);
    const unsigned ballot = __ballot_sync(0xffffffffu, hit);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) sh.csum[warp] = __popc(ballot);
    __syncthreads();
    unsigned long long before = 0;
    for (int wi = 0; wi < warp; ++wi) before += sh.csum[wi];
    unsigned long long chunk = 0;
    for (int wi = 0; wi < (kThreads >> 5); ++wi) chunk += sh.csum[wi];
    const int64_t rank = seen + static_cast<int64_t>(before) + __popc(ballot & ((1u << lane) - 1)) + 1;
    if (hit && rank == need) sh.found = static_cast<int>(i);
    seen += static_cast<int64_t>(chunk);
    __syncthreads();
    found = sh.found;
    if (found < 0 && seen >= need) found = -2;  // cannot happen; stops the loop defensively
  }
  __syncthreads();
  return Cut{key, found >= 0 ? found : vocab - 1};
}

// The draw without top-k / top-p, in token order (the host sampler's order): the first id whose running mass
// (weights exp(row - mx)) exceeds `target`, kThreads ids at a time; the last id with mass if rounding left the
// target past the total.
__device__ __forceinline__ int64_t draw_in_token_order(const float* row, int64_t vocab, float mx, double target,
                                                       int lane, int warp, Shared& sh) {
  double run = 0;
  if (threadIdx.x == 0) sh.found = -1;
  for (int64_t base = 0; base < vocab; base += kThreads) {
    const int64_t i = base + threadIdx.x;
    const double w = i < vocab ? static_cast<double>(__expf(row[i] - mx)) : 0.0;
    // Inclusive scan of w over the block: warp scan, then the warps' totals. A lane's exclusive sum is its
    // left neighbour's inclusive one (the same number), so exactly one lane sees the target crossed.
    double incl = w;
    for (int o = 1; o < 32; o <<= 1) {
      const double y = __shfl_up_sync(0xffffffffu, incl, o);
      if (lane >= o) incl += y;
    }
    double excl = __shfl_up_sync(0xffffffffu, incl, 1);
    if (lane == 0) excl = 0;
    __syncthreads();
    if (lane == 31) sh.dsum[warp] = incl;
    __syncthreads();
    double before = 0, chunk = 0;
    for (int wi = 0; wi < (kThreads >> 5); ++wi) {
      if (wi < warp) before += sh.dsum[wi];
      chunk += sh.dsum[wi];
    }
    if (w > 0 && run + before + incl > target && run + before + excl <= target) sh.found = static_cast<int>(i);
    run += chunk;
    __syncthreads();
    if (sh.found >= 0 || run > target) break;
  }
  __syncthreads();
  int64_t chosen = sh.found;
  if (chosen < 0) {  // rounding left the target past the last sum: the last token with mass
    if (threadIdx.x == 0) sh.found = -1;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads)
      if (__expf(row[i] - mx) > 0) atomicMax(&sh.found, static_cast<int>(i));
    __syncthreads();
    chosen = sh.found;
  }
  return chosen;
}

__global__ void __launch_bounds__(kThreads)
    sample_kernel(float* logits, int64_t vocab, const SampleSpec* specs, const int32_t* pen_tokens,
                  const int32_t* pen_counts, const uint64_t* masks, int64_t mask_words, int32_t* token,
                  float* log_prob) {
  __shared__ Shared sh;
  const SampleSpec sp = specs[blockIdx.x];
  float* row = logits + static_cast<int64_t>(sp.row) * vocab;
  // 1. NaN -> -inf and the guide's mask (banning before the penalties ends the same as after: they keep -inf),
  // then the penalties on the distinct tokens of the sequence (logits-processors.cpp's rules).
  const uint64_t* mask = sp.mask >= 0 ? masks + static_cast<int64_t>(sp.mask) * mask_words : nullptr;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads)
    if (row[i] != row[i] || (mask != nullptr && !((mask[i >> 6] >> (i & 63)) & 1u))) row[i] = -INFINITY;
  __syncthreads();
  for (int j = threadIdx.x; j < sp.pen_count; j += kThreads) {
    const int32_t t = pen_tokens[sp.pen_begin + j];
    if (t < 0 || t >= vocab) continue;
    float x = row[t];
    if (sp.repetition != 1.0f) x = x > 0 ? x / sp.repetition : x * sp.repetition;
    const int32_t count = pen_counts[sp.pen_begin + j];
    if (count > 0) {
      if (sp.presence != 0.0f) x -= sp.presence;
      if (sp.frequency != 0.0f) x -= sp.frequency * static_cast<float>(count);
    }
    row[t] = x;
  }
  __syncthreads();
  // 2. Temperature (sampling only), the max and its lowest id.
  const float inv_t = sp.greedy ? 1.0f : 1.0f / sp.temperature;
  float v = -INFINITY;
  int idx = INT_MAX;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    float x = row[i];
    if (!sp.greedy && inv_t != 1.0f) row[i] = x = x * inv_t;
    better(v, idx, x, static_cast<int>(i));
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int o = 16; o > 0; o >>= 1) better(v, idx, __shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, idx, o));
  __syncthreads();
  if (lane == 0) {
    sh.fmax[warp] = v;
    sh.imax[warp] = idx;
  }
  __syncthreads();
  v = sh.fmax[0];
  idx = sh.imax[0];
  for (int w = 1; w < (kThreads >> 5); ++w) better(v, idx, sh.fmax[w], sh.imax[w]);
  const float mx = v;
  if (mx == -INFINITY) {  // every token banned: the host sampler's answers
    if (threadIdx.x == 0) {
      token[blockIdx.x] = 0;
      log_prob[blockIdx.x] = sp.greedy ? -INFINITY : 0.0f;
    }
    return;
  }
  if (sp.greedy) {
    double sum = 0;
    // (Single-precision exponentials, each to ~1e-7 as greedy_kernel's, summed in double: a row is one block, and
    // 128k double-precision exponentials keep its SM's few FP64 units busy.)
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) sum += static_cast<double>(expf(row[i] - mx));
    sum = block_total(sum, sh.dsum);
    if (threadIdx.x == 0) {
      token[blockIdx.x] = idx;
      log_prob[blockIdx.x] = static_cast<float>(-log(sum));
    }
    return;
  }
  // 3. The kept set: the top_k best, then the top_p prefix of it; its mass.
  Cut set{0u, vocab};  // everything
  const bool limited = sp.top_k > 0 && sp.top_k < vocab;
  if (limited) set = find_best_first<false>(row, vocab, set, mx, static_cast<double>(sp.top_k), false, sh);
  double total = 0;
  for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
    const float x = row[i];
    if (set.keeps(order_key(x), i)) total += static_cast<double>(__expf(x - mx));
  }
  total = block_total(total, sh.dsum);
  double kept = total;
  const bool nucleus = sp.top_p < 1.0f;
  if (nucleus) {
    set = find_best_first<true>(row, vocab, set, mx, static_cast<double>(sp.top_p) * total, false, sh);
    kept = 0;
    for (int64_t i = threadIdx.x; i < vocab; i += kThreads) {
      const float x = row[i];
      if (set.keeps(order_key(x), i)) kept += static_cast<double>(__expf(x - mx));
    }
    kept = block_total(kept, sh.dsum);
  }
  // 4. The draw.
  const double target = counter_uniform_dev(sp.seed, sp.step) * kept;
  int64_t chosen = -1;
  if (limited || nucleus) {
    chosen = find_best_first<true>(row, vocab, set, mx, target, true, sh).id;
  } else {
    chosen = draw_in_token_order(row, vocab, mx, target, lane, warp, sh);
  }
  if (threadIdx.x == 0) {
    const double p = static_cast<double>(__expf(row[chosen] - mx)) / kept;
    token[blockIdx.x] = static_cast<int32_t>(chosen);
    log_prob[blockIdx.x] = static_cast<float>(log(p));
  }
}

}  // namespace

void sample_rows(float* logits, int64_t vocab, const SampleSpec* specs, int32_t n, const int32_t* pen_tokens,
                 const int32_t* pen_counts, const uint64_t* masks, int64_t mask_words, int32_t* token,
                 float* log_prob, cudaStream_t s) {
  if (n == 0) return;
  sample_kernel<<<static_cast<unsigned>(n), kThreads, 0, s>>>(logits, vocab, specs, pen_tokens, pen_counts, masks,
                                                              mask_words, token, log_prob);
  check_launch("sample_rows");
}

}  // namespace engine::cuda
