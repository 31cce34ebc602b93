#include "cuda/cuda-decoder.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "cpu/rope.h"
#include "cuda/cuda-backend.h"
#include "errors.h"
#include "model/chunk-validation.h"

namespace engine::cuda {
namespace {

Act to_act(cpu::Activation a) {
  switch (a) {
    case cpu::Activation::silu: return Act::silu;
    case cpu::Activation::gelu: return Act::gelu;
    case cpu::Activation::gelu_tanh: return Act::gelu_tanh;
    case cpu::Activation::relu: return Act::relu;
  }
  return Act::silu;
}

DType resolve_dtype(const std::string& requested, const ModelConfig& c) {
  if (requested == "bfloat16" || requested == "bf16") return DType::bf16;
  if (requested == "float16" || requested == "fp16" || requested == "half") return DType::f16;
  if (requested != "auto")
    throw EngineError(ErrorCode::invalid_argument,
                      "dtype must be auto, bfloat16 or float16 for the CUDA backend, got '" + requested + "'");
  return c.torch_dtype == "float16" ? DType::f16 : DType::bf16;
}

int pick_device(const LoadOptions& o) {
  int count = 0;
  check_cuda(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  if (count == 0) throw EngineError(ErrorCode::unsupported, "device cuda: no GPU is visible");
  if (o.gpu_device >= 0) {
    if (o.gpu_device >= count)
      throw EngineError(ErrorCode::invalid_argument, "gpu device " + std::to_string(o.gpu_device) + " does not exist; " +
                                                         std::to_string(count) + " GPU(s) are visible");
    return o.gpu_device;
  }
  // One rank per GPU on a host: the rank's place among the host's ranks picks its GPU.
  return comm_info().local_rank % count;
}

// Byte offsets of the per-iteration metadata, one pinned block copied to the device in one transfer.
struct MetaLayout {
  size_t tokens, positions, kv_dst, rows_all, rows_last, groups_all, groups_last, out_rows, greedy, tables, total;
};
size_t align8(size_t n) { return (n + 7) / 8 * 8; }
MetaLayout meta_layout(int64_t T, int64_t R, int64_t table_entries) {
  MetaLayout m{};
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t here = at;
    at = align8(at + bytes);
    return here;
  };
  m.tokens = take(4 * T);
  m.positions = take(4 * T);
  m.kv_dst = take(8 * T);
  m.rows_all = take(sizeof(AttnRow) * T);
  m.rows_last = take(sizeof(AttnRow) * R);
  m.groups_all = take(sizeof(AttnGroup) * T);
  m.groups_last = take(sizeof(AttnGroup) * R);
  m.out_rows = take(4 * R);
  m.greedy = take(4 * R);
  m.tables = take(4 * std::max<int64_t>(table_entries, 1));
  m.total = at;
  return m;
}

constexpr size_t kStagingFloats = size_t{32} << 20;  // 128 MB of fp32 per upload step
}  // namespace

CudaDecoder::CudaDecoder(const ModelConfig& config, const DecoderSpec& spec, const ParallelLayout& layout,
                         const LoadOptions& options)
    : config_(config),
      spec_(spec),
      layout_(layout),
      tp_(options.tp_comm),
      pp_(options.pp_comm),
      dt_(resolve_dtype(options.dtype, config)),
      act_(to_act(spec.act)),
      max_num_tokens_(std::max(1, options.max_num_tokens)),
      max_batch_size_(std::max(1, options.max_batch_size)) {
  if (!attention_supports_head_dim(config_.head_dim))
    throw EngineError(ErrorCode::unsupported, "device cuda: head_dim " + std::to_string(config_.head_dim) +
                                                  " is not supported by the CUDA attention kernel (16, 32, 64, 128, "
                                                  "256); use device cpu");
  device_ = pick_device(options);
  use_device();
  check_cuda(cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, device_), "cudaDeviceGetAttribute");
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  gemm_ = std::make_unique<Gemm>(stream_);
  if (const char* g = std::getenv("TRTLLM_CUDA_GRAPHS")) graphs_enabled_ = std::string(g) != "0";
  if (const char* f = std::getenv("TRTLLM_CUDA_FUSE_NORM")) fuse_norm_ = std::string(f) != "0";
  if (const char* f = std::getenv("TRTLLM_CUDA_FUSE_KV")) fuse_kv_ = std::string(f) != "0";
  num_heads_ = layout_.local_heads();
  num_kv_heads_ = layout_.local_kv_heads();
  num_layers_ = layout_.local_layers();
  inter_ = layout_.local_inter();
  q_dim_ = static_cast<int64_t>(num_heads_) * config_.head_dim;
  kv_dim_ = static_cast<int64_t>(num_kv_heads_) * config_.head_dim;
  if (spec_.rope) {
    const std::vector<float> inv = cpu::rope_inv_freq(config_.head_dim, config_.rope_theta, config_.rope_scaling);
    inv_freq_.reset(sizeof(float) * inv.size());
    check_cuda(cudaMemcpy(inv_freq_.get(), inv.data(), sizeof(float) * inv.size(), cudaMemcpyHostToDevice),
               "upload inv_freq");
  }
}

CudaDecoder::~CudaDecoder() {
  // Buffers free themselves; the stream goes last, after everything queued on it finished.
  if (stream_ != nullptr) {
    cudaSetDevice(device_);
    cudaStreamSynchronize(stream_);
    drop_graphs();
    gemm_.reset();
    cudaStreamDestroy(stream_);
  }
}

void CudaDecoder::use_device() const { check_cuda(cudaSetDevice(device_), "cudaSetDevice"); }

// ---- loading ----

void CudaDecoder::upload_matrix(const std::vector<float>& host, DeviceBuffer& dst, bool f32) {
  if (host.empty()) return;
  const size_t n = host.size();
  dst.reset(n * (f32 ? sizeof(float) : dtype_size(dt_)));
  if (f32) {
    check_cuda(cudaMemcpy(dst.get(), host.data(), n * sizeof(float), cudaMemcpyHostToDevice), "upload weights");
  } else {
    DeviceBuffer staging(std::min(n, kStagingFloats) * sizeof(float));
    for (size_t at = 0; at < n; at += kStagingFloats) {
      const size_t len = std::min(kStagingFloats, n - at);
      check_cuda(cudaMemcpyAsync(staging.get(), host.data() + at, len * sizeof(float), cudaMemcpyHostToDevice, stream_),
                 "upload weights");
      convert(staging.as<float>(), static_cast<char*>(dst.get()) + at * dtype_size(dt_), dt_,
              static_cast<int64_t>(len), stream_);
      check_cuda(cudaStreamSynchronize(stream_), "convert weights");
    }
  }
  weight_bytes_ += dst.bytes();
}

void CudaDecoder::upload(DecoderWeights w) {
  use_device();
  auto norm = [&](Norm& n, DNorm& d) {
    upload_matrix(n.w, d.w, true);
    upload_matrix(n.b, d.b, true);
    n = Norm();
  };
  auto lin = [&](Linear& l, DLinear& d) {
    d.out = l.out;
    d.in = l.in;
    upload_matrix(l.w, d.w, false);
    upload_matrix(l.b, d.b, true);
    l = Linear();  // the host copy goes as soon as the device one exists
  };
  upload_matrix(w.embed, embed_, false);
  w.embed = {};
  upload_matrix(w.pos_embed, pos_embed_, false);
  w.pos_embed = {};
  layers_.resize(w.layers.size());
  for (size_t i = 0; i < w.layers.size(); ++i) {
    DecoderLayerWeights& l = w.layers[i];
    norm(l.attn_norm, layers_[i].attn_norm);
    norm(l.mlp_norm, layers_[i].mlp_norm);
    lin(l.qkv, layers_[i].qkv);
    lin(l.o, layers_[i].o);
    lin(l.up, layers_[i].up);
    lin(l.down, layers_[i].down);
  }
  norm(w.final_norm, final_norm_);
  upload_matrix(w.lm_head, lm_head_, false);
  reserve(max_num_tokens_, max_batch_size_);
}

void CudaDecoder::fill_matrix(const DummyMatrix& m, uint64_t seed, DeviceBuffer& dst, bool f32) {
  if (m.empty()) return;
  const size_t elt = f32 ? sizeof(float) : dtype_size(dt_);
  dst.reset(static_cast<size_t>(m.out * m.in) * elt);
  check_cuda(cudaMemsetAsync(dst.get(), 0, dst.bytes(), stream_), "cudaMemset");  // padding rows stay zero
  int64_t row = 0;
  for (const DummyPart& p : m.parts) {
    fill_dummy(static_cast<char*>(dst.get()) + static_cast<size_t>(row * m.in) * elt, f32, dt_, p.rows, p.cols, m.in,
               seed, p.tensor, p.row0, p.col0, p.global_cols, kDummyScale, stream_);
    row += p.rows;
  }
  weight_bytes_ += dst.bytes();
}

void CudaDecoder::generate(const DummyPlan& plan, uint64_t seed) {
  use_device();
  auto norm = [&](const DummyNorm& n, DNorm& d) {
    d.w.reset(sizeof(float) * n.dim);
    fill_constant(d.w.as<float>(), n.dim, 1.0f, stream_);
    weight_bytes_ += d.w.bytes();
    if (n.bias) {
      d.b.reset(sizeof(float) * n.dim);
      fill_constant(d.b.as<float>(), n.dim, 0.0f, stream_);
      weight_bytes_ += d.b.bytes();
    }
  };
  auto lin = [&](const DummyLinear& l, DLinear& d) {
    d.out = l.w.out;
    d.in = l.w.in;
    fill_matrix(l.w, seed, d.w, false);
    fill_matrix(l.b, seed, d.b, true);
  };
  fill_matrix(plan.embed, seed, embed_, false);
  fill_matrix(plan.pos_embed, seed, pos_embed_, false);
  layers_.resize(plan.layers.size());
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    const DummyLayer& l = plan.layers[i];
    norm(l.attn_norm, layers_[i].attn_norm);
    norm(l.mlp_norm, layers_[i].mlp_norm);
    lin(l.qkv, layers_[i].qkv);
    lin(l.o, layers_[i].o);
    lin(l.up, layers_[i].up);
    lin(l.down, layers_[i].down);
  }
  if (plan.has_final_norm) norm(plan.final_norm, final_norm_);
  fill_matrix(plan.lm_head, seed, lm_head_, false);
  check_cuda(cudaStreamSynchronize(stream_), "generate dummy weights");
  reserve(max_num_tokens_, max_batch_size_);
}

// ---- memory ----

void CudaDecoder::reserve(int64_t tokens, int64_t logit_rows) {
  use_device();
  tokens = std::max<int64_t>(tokens, 1);
  logit_rows = std::max<int64_t>(std::min(logit_rows, tokens), 1);
  const int64_t H = config_.hidden_size, es = static_cast<int64_t>(dtype_size(dt_));
  const int64_t qkv_w = q_dim_ + 2 * kv_dim_;
  const int64_t up_w = layers_.empty() ? 0 : layers_[0].up.out;
  x_.ensure(tokens * H * 4);
  x2_.ensure(tokens * H * 4);
  xn_.ensure(tokens * H * es);
  qkv_.ensure(tokens * qkv_w * 4);
  attn_.ensure(tokens * q_dim_ * es);
  mlp_.ensure(tokens * up_w * es);
  if (spec_.gated_mlp) mlp_act_.ensure(tokens * inter_ * es);
  attn_ws_.ensure(sizeof(float) * attention_workspace_bound(num_heads_, num_kv_heads_, config_.head_dim, num_sms_));
  if (layout_.last_stage() || layout_.leader()) {
    const int64_t Vl = layout_.local_vocab(), V = config_.vocab_size;
    if (layout_.last_stage()) logits_local_.ensure(logit_rows * Vl * 4);
    if (layout_.last_stage() && tp_.size() > 1) logits_all_.ensure(logit_rows * Vl * tp_.size() * 4);
    if (tp_.size() > 1 || !layout_.last_stage()) logits_full_.ensure(logit_rows * V * 4);
    if (layout_.leader()) {
      logits_host_.ensure(logit_rows * V * 4);
      greedy_dev_.ensure(logit_rows * 12);
      greedy_host_.ensure(logit_rows * 12);
    }
  }
  // Metadata for the block tables of a full batch, so that a forward pass after the KV pool took the free memory
  // does not need to grow it (it still can, for unusually long tables).
  drop_graphs();  // buffers may move below
  const size_t meta = meta_layout(tokens, logit_rows, kGraphTableEntries).total;
  meta_dev_.ensure(meta);
  meta_host_.ensure(meta);
  cap_tokens_ = std::max(cap_tokens_, tokens);
  cap_logit_rows_ = std::max(cap_logit_rows_, logit_rows);
  if (layout_.leader() && iota_.bytes() < static_cast<size_t>(cap_logit_rows_) * 4) {
    std::vector<int32_t> iota(static_cast<size_t>(cap_logit_rows_));
    for (size_t i = 0; i < iota.size(); ++i) iota[i] = static_cast<int32_t>(i);
    iota_.reset(iota.size() * 4);
    check_cuda(cudaMemcpy(iota_.get(), iota.data(), iota.size() * 4, cudaMemcpyHostToDevice), "upload row indices");
  }
}

size_t CudaDecoder::activation_bytes() const {
  size_t n = 0;
  for (const DeviceBuffer* b : {&x_, &x2_, &xn_, &qkv_, &attn_, &mlp_, &mlp_act_, &attn_ws_, &logits_local_,
                                &logits_all_, &logits_full_, &meta_dev_, &greedy_dev_})
    n += b->bytes();
  return n;
}

size_t CudaDecoder::device_free_bytes() const {
  use_device();
  size_t free = 0, total = 0;
  check_cuda(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return free;
}

size_t CudaDecoder::kv_bytes_per_token() const {
  return static_cast<size_t>(num_layers_) * 2 * static_cast<size_t>(kv_dim_) * dtype_size(dt_);
}

void CudaDecoder::make_device_comms() {
#ifdef ENGINE_HAVE_NCCL
  if (tp_.size() > 1 && !tp_dev_) tp_dev_ = DeviceComm::create(tp_);
  if (pp_.size() > 1 && !pp_dev_) pp_dev_ = DeviceComm::create(pp_);
#else
  if (tp_.size() > 1 || pp_.size() > 1)
    throw EngineError(ErrorCode::unsupported, "device cuda with tp or pp > 1 needs NCCL, which this build lacks "
                                              "(set NCCL_ROOT when configuring)");
#endif
}

void CudaDecoder::allocate_kv(int32_t num_blocks, int32_t tokens_per_block) {
  if (num_blocks <= 0 || tokens_per_block <= 0)
    throw EngineError(ErrorCode::invalid_argument, "allocate_kv needs num_blocks > 0 and tokens_per_block > 0, got " +
                                                       std::to_string(num_blocks) + " and " +
                                                       std::to_string(tokens_per_block));
  use_device();
  // The first collective every rank reaches in the same order: the NCCL communicators are made here.
  make_device_comms();
  block_elems_ = static_cast<int64_t>(num_kv_heads_) * tokens_per_block * config_.head_dim;
  const size_t bytes = static_cast<size_t>(num_layers_) * 2 * static_cast<size_t>(num_blocks) *
                       static_cast<size_t>(block_elems_) * dtype_size(dt_);
  drop_graphs();  // captured graphs point into the old pool
  kv_.reset(0);
  try {
    kv_.reset(bytes);
  } catch (const EngineError&) {
    throw EngineError(ErrorCode::invalid_argument,
                      "KV cache of " + std::to_string(num_blocks) + " blocks (" + std::to_string(bytes >> 20) +
                          " MiB) does not fit on GPU " + std::to_string(device_) + " (" +
                          std::to_string(device_free_bytes() >> 20) +
                          " MiB free); lower kv_cache_free_gpu_mem_fraction or max_tokens_in_paged_kv_cache");
  }
  num_blocks_ = num_blocks;
  tokens_per_block_ = tokens_per_block;
}

void CudaDecoder::copy_kv_block(int32_t src, int32_t dst) {
  if (src < 0 || src >= num_blocks_ || dst < 0 || dst >= num_blocks_)
    throw EngineError(ErrorCode::internal, "copy_kv_block(" + std::to_string(src) + ", " + std::to_string(dst) +
                                               ") outside the pool of " + std::to_string(num_blocks_) + " blocks");
  if (src == dst) return;
  use_device();
  // Every layer's K and V array holds the block at the same offset, num_blocks blocks apart.
  const size_t es = dtype_size(dt_), block = static_cast<size_t>(block_elems_) * es;
  const size_t stride = static_cast<size_t>(num_blocks_) * block;
  char* base = kv_.as<char>();
  for (int32_t a = 0; a < 2 * num_layers_; ++a)
    check_cuda(cudaMemcpyAsync(base + a * stride + static_cast<size_t>(dst) * block,
                               base + a * stride + static_cast<size_t>(src) * block, block, cudaMemcpyDeviceToDevice,
                               stream_),
               "copy_kv_block");
}

// ---- forward ----

void CudaDecoder::linear(const DLinear& l, const void* x, int64_t rows, void* y, bool y_f32, bool accumulate) {
  gemm_->xwt(rows, l.out, l.in, x, l.w.get(), dt_, y, y_f32, l.out, accumulate);
}

void CudaDecoder::norm_linear(const DNorm& n, const float* x, int64_t rows, const DLinear& l, void* y, bool y_f32) {
  if (fuse_norm_ && n.bias() == nullptr &&
      gemm_->xwt_rms(rows, l.out, l.in, x, n.w.as<float>(), config_.norm_eps, l.w.get(), dt_, y, y_f32, l.out))
    return;
  norm(x, xn_.get(), dt_, rows, config_.hidden_size, n.w.as<float>(), n.bias(), config_.norm_eps, stream_);
  linear(l, xn_.get(), rows, y, y_f32, false);
}

void CudaDecoder::all_reduce(float* x, size_t n) {
  if (tp_.size() == 1) return;
  tp_dev_->all_reduce_sum(x, n, stream_);
  comm_stats_.bytes += n * sizeof(float);
  ++comm_stats_.calls;
}

void CudaDecoder::row_parallel(const DLinear& l, const void* x, int64_t rows, float* y) {
  // The residual stream y is the same on every tp rank: rank 0 adds its partial product (and the bias) onto it,
  // the others overwrite it with theirs, so one all-reduce yields y + Σ partials + bias.
  const bool rank0 = tp_.rank() == 0;
  linear(l, x, rows, y, true, rank0);
  if (l.bias() != nullptr) add_bias(y, l.bias(), rows, l.out, stream_);
  all_reduce(y, static_cast<size_t>(rows * l.out));
}

void CudaDecoder::lm_head_rows(const void* xn, int64_t r0, int64_t n, ForwardOutput& out,
                               const std::vector<int32_t>& host_row, const std::vector<int32_t>& greedy_chunk,
                               const std::vector<int32_t>& sample_chunk, const std::vector<SequenceChunk>& chunks) {
  const int64_t V = config_.vocab_size, H = config_.hidden_size;
  const size_t es = dtype_size(dt_);
  float* logits = nullptr;
  if (layout_.last_stage()) {
    const int64_t Vl = layout_.local_vocab();
    const void* head = lm_head_.empty() ? embed_.get() : lm_head_.get();
    const void* x = static_cast<const char*>(xn) + static_cast<size_t>(r0 * H) * es;
    gemm_->xwt(n, Vl, H, x, head, dt_, logits_local_.get(), true, Vl, false);
    logits = logits_local_.as<float>();
    if (tp_.size() > 1) {
      mask_columns(logits, n, Vl, layout_.local_real_vocab(V), stream_);
      tp_dev_->all_gather(logits, static_cast<size_t>(n * Vl), logits_all_.as<float>(), stream_);
      comm_stats_.bytes += static_cast<uint64_t>(n * Vl) * 4;
      ++comm_stats_.calls;
      assemble_vocab(logits_all_.as<float>(), tp_.size(), n, Vl, V, logits_full_.as<float>(), stream_);
      logits = logits_full_.as<float>();
    }
    if (pp_.size() > 1 && tp_.rank() == 0) {
      pp_dev_->send(logits, static_cast<size_t>(n * V) * 4, 0, stream_);
      comm_stats_.bytes += static_cast<uint64_t>(n * V) * 4;
      ++comm_stats_.calls;
    }
  } else if (layout_.leader()) {
    logits = logits_full_.as<float>();
    pp_dev_->recv(logits, static_cast<size_t>(n * V) * 4, pp_.size() - 1, stream_);
    comm_stats_.bytes += static_cast<uint64_t>(n * V) * 4;
    ++comm_stats_.calls;
  }
  if (!layout_.leader()) return;

  // Greedy rows: argmax on the GPU; the others: copied to the host, runs of consecutive host rows at once.
  // greedy buffers: [0, cap) tokens, [cap, 2 cap) log-probs, [2 cap, 3 cap) the rows' indices in this slice.
  const int64_t cap = cap_logit_rows_;
  int32_t* gd = greedy_dev_.as<int32_t>();
  int32_t* gh = greedy_host_.as<int32_t>();
  int32_t ng = 0;
  for (int64_t i = 0; i < n; ++i)
    if (greedy_chunk[r0 + i] >= 0) gh[2 * cap + ng++] = static_cast<int32_t>(i);
  if (ng > 0) {
    check_cuda(cudaMemcpyAsync(gd + 2 * cap, gh + 2 * cap, sizeof(int32_t) * ng, cudaMemcpyHostToDevice, stream_),
               "greedy rows");
    greedy_sample(logits, gd + 2 * cap, ng, V, gd, reinterpret_cast<float*>(gd + cap), stream_);
    check_cuda(cudaMemcpyAsync(gh, gd, sizeof(int32_t) * ng, cudaMemcpyDeviceToHost, stream_), "greedy tokens");
    check_cuda(cudaMemcpyAsync(gh + cap, gd + cap, sizeof(float) * ng, cudaMemcpyDeviceToHost, stream_),
               "greedy log-probs");
  }
  enqueue_sampling(logits, r0, n, sample_chunk, chunks);
  float* staging = logits_host_.as<float>();
  for (int64_t i = 0; i < n;) {
    if (host_row[r0 + i] < 0) {
      ++i;
      continue;
    }
    int64_t j = i + 1;
    while (j < n && host_row[r0 + j] == host_row[r0 + j - 1] + 1) ++j;
    check_cuda(cudaMemcpyAsync(staging + i * V, logits + i * V, sizeof(float) * (j - i) * V, cudaMemcpyDeviceToHost,
                               stream_),
               "copy logits");
    i = j;
  }
  check_cuda(cudaStreamSynchronize(stream_), "forward");
  for (int64_t i = 0; i < n; ++i)
    if (host_row[r0 + i] >= 0)
      std::memcpy(out.logits.data() + static_cast<size_t>(host_row[r0 + i]) * V, staging + i * V, sizeof(float) * V);
  sampler_.finish(out);
  const float* glp = reinterpret_cast<const float*>(gh + cap);
  for (int32_t g = 0; g < ng; ++g) {
    const int64_t row = r0 + gh[2 * cap + g];
    out.sampled[static_cast<size_t>(greedy_chunk[row])] = DeviceSample{gh[g], glp[g]};
  }
}

void CudaDecoder::enqueue_sampling(float* logits, int64_t r0, int64_t n, const std::vector<int32_t>& sample_chunk,
                                   const std::vector<SequenceChunk>& chunks) {
  for (int64_t i = 0; i < n; ++i)
    if (const int32_t c = sample_chunk[r0 + i]; c >= 0)
      sampler_.add(static_cast<int32_t>(i), c, *chunks[static_cast<size_t>(c)].sample_on_device);
  sampler_.enqueue(logits, config_.vocab_size, stream_);
}

void CudaDecoder::forward(const std::vector<SequenceChunk>& chunks, ForwardOutput& out) {
  validate_chunks(chunks, config_, !spec_.rope, num_blocks_, tokens_per_block_);
  use_device();
  comm_stats_ = {};
  sampler_.clear();
  const int64_t V = config_.vocab_size;
  const int32_t hd = config_.head_dim;

  // The iteration's layout: every chunk's tokens as consecutive rows; logits rows as the CPU model (all of an
  // all_logits chunk, else its last); host rows for the ones the executor samples itself.
  int64_t T = 0, table_entries = 0;
  for (const auto& c : chunks) {
    T += static_cast<int64_t>(c.tokens.size());
    table_entries += static_cast<int64_t>(c.block_ids.size());
  }
  std::vector<int32_t> out_rows, host_row, greedy_chunk, sample_chunk;
  out.vocab_size = static_cast<int32_t>(V);
  out.first_row.assign(chunks.size(), -1);
  out.sampled.assign(chunks.size(), DeviceSample{});
  int32_t host_rows = 0;
  {
    int64_t row = 0;
    for (size_t c = 0; c < chunks.size(); ++c) {
      const SequenceChunk& ch = chunks[c];
      const int32_t n = static_cast<int32_t>(ch.tokens.size());
      const bool greedy = ch.greedy_on_device && !ch.all_logits && samples_greedy();
      const bool sampled = !greedy && ch.sample_on_device && !ch.all_logits && samples_greedy();
      if (!greedy && !sampled) out.first_row[c] = host_rows;
      for (int32_t i = 0; i < n; ++i) {
        if (!(ch.all_logits || i == n - 1)) continue;
        out_rows.push_back(static_cast<int32_t>(row + i));
        host_row.push_back(greedy || sampled ? -1 : host_rows++);
        greedy_chunk.push_back(greedy ? static_cast<int32_t>(c) : -1);
        sample_chunk.push_back(sampled ? static_cast<int32_t>(c) : -1);
      }
      row += n;
    }
  }
  const int64_t R = static_cast<int64_t>(out_rows.size());
  if (layout_.leader())
    out.logits.resize(static_cast<size_t>(host_rows) * static_cast<size_t>(V));
  else
    out.logits.clear();
  if (T == 0) return;
  if (T > cap_tokens_) reserve(T, cap_logit_rows_);

  // A decode batch (one token per sequence, last-row logits only) on a single GPU replays a CUDA graph captured
  // for its batch size and context bucket: one launch instead of ~10 per layer.
  bool one_token_each = true;
  for (const SequenceChunk& ch : chunks) one_token_each = one_token_each && ch.tokens.size() == 1;
  bool graph = graphs_enabled_ && tp_.size() == 1 && pp_.size() == 1 && R == T && T <= cap_logit_rows_ &&
               table_entries <= kGraphTableEntries && one_token_each;
  for (const SequenceChunk& ch : chunks) graph = graph && !ch.all_logits;

  // Per-row metadata, one pinned block and one copy. A graph's layout depends on the batch size alone.
  const MetaLayout ml = meta_layout(T, R, graph ? kGraphTableEntries : table_entries);
  meta_host_.ensure(ml.total);
  if (ml.total > meta_dev_.bytes()) {
    meta_dev_.ensure(ml.total);
    drop_graphs();  // captured graphs read the old buffer
  }
  char* mh = meta_host_.as<char>();
  auto* tokens = reinterpret_cast<int32_t*>(mh + ml.tokens);
  auto* positions = reinterpret_cast<int32_t*>(mh + ml.positions);
  auto* kv_dst = reinterpret_cast<int64_t*>(mh + ml.kv_dst);
  auto* rows_all = reinterpret_cast<AttnRow*>(mh + ml.rows_all);
  auto* rows_last = reinterpret_cast<AttnRow*>(mh + ml.rows_last);
  auto* out_rows_h = reinterpret_cast<int32_t*>(mh + ml.out_rows);
  auto* tables = reinterpret_cast<int32_t*>(mh + ml.tables);
  int32_t max_ctx = 0;
  {
    int64_t row = 0, table_at = 0;
    for (const SequenceChunk& ch : chunks) {
      std::memcpy(tables + table_at, ch.block_ids.data(), sizeof(int32_t) * ch.block_ids.size());
      for (size_t i = 0; i < ch.tokens.size(); ++i, ++row) {
        const int32_t p = ch.past_len + static_cast<int32_t>(i);
        tokens[row] = ch.tokens[i];
        positions[row] = p;
        kv_dst[row] = static_cast<int64_t>(ch.block_ids[p / tokens_per_block_]) * block_elems_ +
                      static_cast<int64_t>(p % tokens_per_block_) * hd;
        rows_all[row] = AttnRow{static_cast<int32_t>(row), p + 1, static_cast<int32_t>(table_at)};
        max_ctx = std::max(max_ctx, p + 1);
      }
      table_at += static_cast<int64_t>(ch.block_ids.size());
    }
    for (int64_t i = 0; i < R; ++i) {
      rows_last[i] = rows_all[out_rows[i]];
      out_rows_h[i] = out_rows[i];
    }
  }
  const int32_t per_group = attention_rows_per_group(num_heads_, num_kv_heads_, hd);
  const int32_t n_groups_all = group_attention_rows(rows_all, static_cast<int32_t>(T), per_group,
                                                    reinterpret_cast<AttnGroup*>(mh + ml.groups_all));
  const int32_t n_groups_last = group_attention_rows(rows_last, static_cast<int32_t>(R), per_group,
                                                     reinterpret_cast<AttnGroup*>(mh + ml.groups_last));
  check_cuda(cudaMemcpyAsync(meta_dev_.get(), mh, ml.total, cudaMemcpyHostToDevice, stream_), "upload metadata");
  char* md = meta_dev_.as<char>();
  const auto* d_tokens = reinterpret_cast<const int32_t*>(md + ml.tokens);
  const auto* d_positions = reinterpret_cast<const int32_t*>(md + ml.positions);
  const auto* d_kv_dst = reinterpret_cast<const int64_t*>(md + ml.kv_dst);
  const auto* d_rows_all = reinterpret_cast<const AttnRow*>(md + ml.rows_all);
  const auto* d_rows_last = reinterpret_cast<const AttnRow*>(md + ml.rows_last);
  const auto* d_out_rows = reinterpret_cast<const int32_t*>(md + ml.out_rows);
  const auto* d_tables = reinterpret_cast<const int32_t*>(md + ml.tables);

  const Meta meta{d_tokens,
                  d_positions,
                  d_kv_dst,
                  d_rows_all,
                  d_rows_last,
                  reinterpret_cast<const AttnGroup*>(md + ml.groups_all),
                  reinterpret_cast<const AttnGroup*>(md + ml.groups_last),
                  n_groups_all,
                  n_groups_last,
                  d_out_rows,
                  d_tables,
                  one_token_each};
  if (!graph) {
    enqueue_layers(meta, T, R, max_ctx);
    if (layout_.last_stage() || layout_.leader()) {
      // The LM head in slices of the reserved logits rows, each sampled / copied out before the next.
      for (int64_t r0 = 0; r0 < R; r0 += cap_logit_rows_)
        lm_head_rows(xn_.get(), r0, std::min(cap_logit_rows_, R - r0), out, host_row, greedy_chunk, sample_chunk,
                     chunks);
    }
    check_cuda(cudaStreamSynchronize(stream_), "forward");
    return;
  }
  // Contexts are bucketed by powers of two: the bucket sizes the attention's split (its grid), positions past a
  // row's own context are skipped by the kernel.
  int32_t bucket = 64;
  while (bucket < max_ctx) bucket *= 2;
  const uint64_t key = (static_cast<uint64_t>(T) << 32) | static_cast<uint32_t>(bucket);
  auto it = graphs_.find(key);
  if (it == graphs_.end()) {
    // One plain run first (it rewrites the same K/V, so it is harmless): the GEMMs pick their kernels by timing,
    // which a capture cannot do.
    enqueue_layers(meta, T, R, bucket);
    enqueue_logits_and_greedy(T);
    cudaGraph_t g = nullptr;
    check_cuda(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    try {
      enqueue_layers(meta, T, R, bucket);
      enqueue_logits_and_greedy(T);
    } catch (...) {
      cudaStreamEndCapture(stream_, &g);
      if (g != nullptr) cudaGraphDestroy(g);
      throw;
    }
    check_cuda(cudaStreamEndCapture(stream_, &g), "cudaStreamEndCapture");
    cudaGraphExec_t exec = nullptr;
    const cudaError_t e = cudaGraphInstantiate(&exec, g, 0);
    cudaGraphDestroy(g);
    check_cuda(e, "cudaGraphInstantiate");
    it = graphs_.emplace(key, exec).first;
  }
  check_cuda(cudaGraphLaunch(it->second, stream_), "cudaGraphLaunch");
  // Tokens and log-probs of every row (the greedy kernel ran on all of them), logits of the host-sampled ones.
  const int64_t cap = cap_logit_rows_;
  int32_t* gd = greedy_dev_.as<int32_t>();
  int32_t* gh = greedy_host_.as<int32_t>();
  check_cuda(cudaMemcpyAsync(gh, gd, sizeof(int32_t) * T, cudaMemcpyDeviceToHost, stream_), "greedy tokens");
  check_cuda(cudaMemcpyAsync(gh + cap, gd + cap, sizeof(float) * T, cudaMemcpyDeviceToHost, stream_), "greedy log-probs");
  float* logits = logits_local_.as<float>();
  enqueue_sampling(logits, 0, T, sample_chunk, chunks);  // (the graph's argmax of these rows is not used)
  float* staging = logits_host_.as<float>();
  for (int64_t i = 0; i < T; ++i)
    if (host_row[i] >= 0)
      check_cuda(cudaMemcpyAsync(staging + i * V, logits + i * V, sizeof(float) * V, cudaMemcpyDeviceToHost, stream_),
                 "copy logits");
  check_cuda(cudaStreamSynchronize(stream_), "forward");
  sampler_.finish(out);
  const float* glp = reinterpret_cast<const float*>(gh + cap);
  for (int64_t i = 0; i < T; ++i) {
    if (host_row[i] >= 0)
      std::memcpy(out.logits.data() + static_cast<size_t>(host_row[i]) * V, staging + i * V, sizeof(float) * V);
    else if (greedy_chunk[i] >= 0)
      out.sampled[static_cast<size_t>(greedy_chunk[i])] = DeviceSample{gh[i], glp[i]};
  }
}

void CudaDecoder::enqueue_logits_and_greedy(int64_t rows) {
  const int64_t V = config_.vocab_size, H = config_.hidden_size;
  const void* head = lm_head_.empty() ? embed_.get() : lm_head_.get();
  gemm_->xwt(rows, V, H, xn_.get(), head, dt_, logits_local_.get(), true, V, false);
  int32_t* gd = greedy_dev_.as<int32_t>();
  greedy_sample(logits_local_.as<float>(), iota_.as<int32_t>(), static_cast<int32_t>(rows), V, gd,
                reinterpret_cast<float*>(gd + cap_logit_rows_), stream_);
}

void CudaDecoder::drop_graphs() {
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
  graphs_.clear();
}

void CudaDecoder::enqueue_layers(const Meta& m, int64_t T, int64_t R, int32_t max_ctx) {
  const int64_t H = config_.hidden_size, V = config_.vocab_size;
  const int32_t hd = config_.head_dim;
  const size_t es = dtype_size(dt_);
  const auto* d_tokens = m.tokens;
  const auto* d_positions = m.positions;
  const auto* d_kv_dst = m.kv_dst;
  const auto* d_rows_all = m.rows_all;
  const auto* d_rows_last = m.rows_last;
  const auto* d_out_rows = m.out_rows;
  const auto* d_tables = m.tables;
  float* x = x_.as<float>();
  float* x2 = x2_.as<float>();
  void* xn = xn_.get();
  float* qkv = qkv_.as<float>();
  void* attn = attn_.get();
  void* mlp = mlp_.get();
  void* mlp_act = spec_.gated_mlp ? mlp_act_.get() : mlp;
  const int64_t qkv_w = q_dim_ + 2 * kv_dim_;

  if (layout_.first_stage()) {
    embed(d_tokens, T, embed_.get(), dt_, layout_.vocab_begin, layout_.local_real_vocab(V), H, x, stream_);
    // Vocab parallel: each token's row came from the one tp rank owning its id, the others gave zeros.
    all_reduce(x, static_cast<size_t>(T * H));
    if (!spec_.rope) add_position_embedding(x, d_positions, T, pos_embed_.get(), dt_, H, stream_);
  } else {
    pp_dev_->recv(x, static_cast<size_t>(T * H) * 4, pp_.rank() - 1, stream_);
    comm_stats_.bytes += static_cast<uint64_t>(T * H) * 4;
    ++comm_stats_.calls;
  }

  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const size_t layer_elems = static_cast<size_t>(num_blocks_) * static_cast<size_t>(block_elems_);
  int64_t rows = T;  // rows still carried: all tokens until the model's last attention, then only logit rows
  for (int32_t l = 0; l < num_layers_; ++l) {
    const DLayer& lw = layers_[l];
    const bool last = layout_.last_stage() && l == num_layers_ - 1;
    char* k_pool = kv_.as<char>() + static_cast<size_t>(2 * l) * layer_elems * es;
    char* v_pool = k_pool + layer_elems * es;

    norm_linear(lw.attn_norm, x, T, lw.qkv, qkv, true);
    // attention() rotates q / k and writes this step's keys and values (in its kernel for small decode batches).
    const NewKv fresh{T, lw.qkv.bias(), d_positions, spec_.rope ? inv_freq_.as<float>() : nullptr, d_kv_dst};
    if (!fuse_kv_)
      rope_and_write_kv(qkv, T, qkv_w, fresh.bias, num_heads_, num_kv_heads_, hd, d_positions, fresh.inv_freq, k_pool,
                        v_pool, dt_, d_kv_dst, tokens_per_block_, stream_);
    AttnArgs a{};
    if (fuse_kv_) a.fresh = fresh;
    a.q = qkv;
    a.q_stride = qkv_w;
    a.k_pool = k_pool;
    a.v_pool = v_pool;
    a.dt = dt_;
    a.block_tables = d_tables;
    a.n_heads = num_heads_;
    a.n_kv = num_kv_heads_;
    a.head_dim = hd;
    a.tokens_per_block = tokens_per_block_;
    a.scale = scale;
    a.out = attn;
    a.out_stride = q_dim_;
    a.max_ctx = max_ctx;
    a.new_last_only = m.one_token_each;
    if (last) {
      // Only rows that produce logits matter past this point (K/V of every token are written), so the last
      // layer's attention, out projection and MLP run on those rows alone.
      a.rows = d_rows_last;
      a.n_rows = static_cast<int32_t>(R);
      a.groups = m.groups_last;
      a.n_groups = m.n_groups_last;
      attention(a, attn_ws_.as<float>(), num_sms_, stream_);
      gather_rows(x, d_out_rows, x2, R, H, stream_);
      std::swap(x, x2);
      rows = R;
    } else {
      a.rows = d_rows_all;
      a.n_rows = static_cast<int32_t>(T);
      a.groups = m.groups_all;
      a.n_groups = m.n_groups_all;
      attention(a, attn_ws_.as<float>(), num_sms_, stream_);
    }
    row_parallel(lw.o, attn, rows, x);

    norm_linear(lw.mlp_norm, x, rows, lw.up, mlp, false);
    if (spec_.gated_mlp)
      gated_activation(mlp, mlp_act, dt_, rows, inter_, act_, lw.up.bias(), stream_);
    else
      activation(mlp, dt_, rows, inter_, act_, lw.up.bias(), stream_);
    row_parallel(lw.down, mlp_act, rows, x);
  }

  if (!layout_.last_stage()) {
    // Every tp rank hands its (identical) activations to the same tp rank of the next stage.
    pp_dev_->send(x, static_cast<size_t>(T * H) * 4, pp_.rank() + 1, stream_);
    comm_stats_.bytes += static_cast<uint64_t>(T * H) * 4;
    ++comm_stats_.calls;
  } else {
    norm(x, xn, dt_, R, H, final_norm_.w.as<float>(), final_norm_.bias(), config_.norm_eps, stream_);
  }
}

}  // namespace engine::cuda
