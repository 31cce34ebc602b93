#include "cuda/cuda-decoder.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "cpu/rope.h"
#include "cuda/cuda-backend.h"
#include "errors.h"
#include "model/model-checks.h"

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
  host_threads_ = options.num_threads > 0 ? options.num_threads : std::max(1, omp_get_num_procs());
  device_ = pick_device(options);
  use_device();
  check_cuda(cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, device_), "cudaDeviceGetAttribute");
  check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  gemm_ = std::make_unique<Gemm>(stream_);
  gemm_->set_before_wait([this] { before_device_wait(wait_ranks_); });
  if (const char* g = std::getenv("TRTLLM_CUDA_GRAPHS")) graphs_enabled_ = std::string(g) != "0";
  if (const char* f = std::getenv("TRTLLM_CUDA_FUSE_NORM")) fuse_norm_ = std::string(f) != "0";
  if (const char* f = std::getenv("TRTLLM_CUDA_FUSE_KV")) fuse_kv_ = std::string(f) != "0";
  if (const char* f = std::getenv("TRTLLM_FP8_FUSE_QUANT")) fuse_quant_ = std::string(f) != "0";
  // TRTLLM_FP8_ACTIVATIONS=0: FP8 weights widened to 16 bits for every multi-row product (W8A16), to measure how
  // much the activations' quantization costs in quality (quantization-quality).
  if (const char* f = std::getenv("TRTLLM_FP8_ACTIVATIONS")) gemm_->set_fp8_activations(std::string(f) != "0");
  if (options.quantization != "" && options.quantization != "fp8")
    throw EngineError(ErrorCode::invalid_argument,
                      "quantization must be empty or fp8, got '" + options.quantization + "'");
  quantize_fp8_ = options.quantization == "fp8";
  num_heads_ = layout_.local_heads();
  num_kv_heads_ = layout_.local_kv_heads();
  num_layers_ = layout_.local_layers();
  inter_ = layout_.local_inter();
  q_dim_ = static_cast<int64_t>(num_heads_) * config_.head_dim;
  kv_dim_ = static_cast<int64_t>(num_kv_heads_) * config_.head_dim;
  if (spec_.rope) {
    // The CPU decoder's tables: longrope's short frequencies, then its long ones (batch-meta.h's use_long picks).
    std::vector<float> inv = cpu::rope_inv_freq(config_.head_dim, config_.rope_theta, config_.rope_scaling);
    if (config_.rope_scaling.longrope()) {
      const std::vector<float> inv_long =
          cpu::rope_inv_freq(config_.head_dim, config_.rope_theta, config_.rope_scaling, true);
      inv.insert(inv.end(), inv_long.begin(), inv_long.end());
    }
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
    if (meta_uploaded_ != nullptr) cudaEventDestroy(meta_uploaded_);
    if (lora_stream_ != nullptr) {
      cudaStreamSynchronize(lora_stream_);
      cudaStreamDestroy(lora_stream_);
      cudaEventDestroy(lora_fork_);
      cudaEventDestroy(lora_join_);
    }
    cudaStreamDestroy(stream_);
  }
}

void CudaDecoder::use_device() const { check_cuda(cudaSetDevice(device_), "cudaSetDevice"); }

void CudaDecoder::reserve(int64_t tokens, int64_t logit_rows) {
  use_device();
  tokens = std::max<int64_t>(tokens, 1);
  logit_rows = std::max<int64_t>(std::min(logit_rows, tokens), 1);
  const int64_t H = config_.hidden_size, es = static_cast<int64_t>(dtype_size(dt_));
  const int64_t qkv_w = q_dim_ + 2 * kv_dim_;
  int64_t up_w = 0;  // (a mixture-of-experts model's first layers may have no dense MLP)
  for (const DLayer& l : layers_) up_w = std::max(up_w, l.up.out);
  x_.ensure(tokens * H * 4);
  x2_.ensure(tokens * H * 4);
  xn_.ensure(tokens * H * es);
  qkv_.ensure(tokens * qkv_w * 4);
  attn_.ensure(tokens * q_dim_ * es);
  mlp_.ensure(tokens * up_w * es);
  if (spec_.gated_mlp) mlp_act_.ensure(tokens * inter_ * es);
  attn_ws_.ensure(sizeof(float) * attention_workspace_bound(num_heads_, num_kv_heads_, config_.head_dim, num_sms_));
  if (config_.sandwich_norms) proj_.ensure(tokens * H * 4);
  reserve_moe(tokens);
  if (fp8()) {
    // The FP8 path's scratch (quantized activations, a widened weight) is sized for the largest product now.
    int64_t max_k = 0, max_n = 0, max_elems = 0;
    for (const DLinear* l : {&layers_[0].qkv, &layers_[0].o, &layers_[0].up, &layers_[0].down}) {
      max_k = std::max(max_k, l->in);
      max_n = std::max(max_n, l->out);
      max_elems = std::max(max_elems, l->in * l->out);
    }
    gemm_->reserve_fp8(tokens, max_k, max_n, max_elems);
  }
  if (layout_.last_stage() || layout_.leader()) {
    const int64_t Vl = layout_.local_vocab(), V = config_.vocab_size;
    if (layout_.last_stage()) logits_local_.ensure(logit_rows * Vl * 4);
    if (layout_.last_stage() && tp_.size() > 1) logits_all_.ensure(logit_rows * Vl * tp_.size() * 4);
    if (tp_.size() > 1 || !layout_.last_stage()) logits_full_.ensure(logit_rows * V * 4);
    // [0, cap) tokens, [cap, 2 cap) log-probs, [2 cap, 3 cap) row indices (cuda-decoder-logits.cpp); under pp the
    // last stage argmaxes into it too (sends_argmaxes).
    greedy_dev_.ensure(logit_rows * 12);
    if (layout_.leader()) {
      logits_host_.ensure(logit_rows * V * 4);
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
  if ((layout_.leader() || layout_.last_stage()) && iota_.bytes() < static_cast<size_t>(cap_logit_rows_) * 4) {
    std::vector<int32_t> iota(static_cast<size_t>(cap_logit_rows_));
    for (size_t i = 0; i < iota.size(); ++i) iota[i] = static_cast<int32_t>(i);
    iota_.reset(iota.size() * 4);
    check_cuda(cudaMemcpy(iota_.get(), iota.data(), iota.size() * 4, cudaMemcpyHostToDevice), "upload row indices");
  }
}

size_t CudaDecoder::activation_bytes() const {
  size_t n = 0;
  for (const DeviceBuffer* b : {&x_, &x2_, &xn_, &qkv_, &attn_, &mlp_, &mlp_act_, &attn_ws_, &proj_, &logits_local_,
                                &logits_all_, &logits_full_, &meta_dev_, &greedy_dev_, &lora_t_})
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
  return static_cast<size_t>(num_layers_) * 2 * static_cast<size_t>(kv_dim_) * kv_element_bytes();
}

std::string CudaDecoder::kv_cache_dtype() const {
  if (kv_fp8_) return fp8_kv_dtype_name(kv_scales_from_);
  return dt_ == DType::bf16 ? "bfloat16" : "float16";
}

void CudaDecoder::use_fp8_kv(std::vector<float> k_scales, std::vector<float> v_scales, std::string from) {
  complete_kv_scales(k_scales, v_scales, num_layers_);
  if (!kv_.empty()) throw EngineError(ErrorCode::internal, "use_fp8_kv after the KV pool was allocated");
  kv_fp8_ = true;
  k_scales_ = std::move(k_scales);
  v_scales_ = std::move(v_scales);
  kv_scales_from_ = std::move(from);
}

void CudaDecoder::make_device_comms() {
#ifdef ENGINE_HAVE_NCCL
  if (tp_.size() > 1 && !tp_dev_) tp_dev_ = DeviceComm::create(tp_, true);
  if (pp_.size() > 1 && !pp_dev_) {
    pp_dev_ = DeviceComm::create(pp_);
    // The stages' transfers connect now, while every rank is here: the neighbours (activations), and the first and
    // last stages (logits). A first transfer in a pass would wait for a peer that may itself be waiting for the
    // leader's next plan (pipelined pp).
    std::vector<int32_t> peers;
    const int32_t r = pp_.rank(), last = pp_.size() - 1;
    for (int32_t p : {r - 1, r + 1, r == 0 ? last : -1, r == last ? 0 : -1})
      if (p >= 0 && p <= last && p != r && std::find(peers.begin(), peers.end(), p) == peers.end()) peers.push_back(p);
    pp_dev_->connect(peers, stream_);
  }
#else
  if (tp_.size() > 1 || pp_.size() > 1)
    throw EngineError(ErrorCode::unsupported, "device cuda with tp or pp > 1 needs NCCL, which this build lacks "
                                              "(set NCCL_ROOT when configuring)");
#endif
}

void CudaDecoder::allocate_kv(int32_t num_blocks, int32_t tokens_per_block) {
  check_kv_allocation(num_blocks, tokens_per_block);
  use_device();
  // The first collective every rank reaches in the same order: the NCCL communicators are made here.
  make_device_comms();
  block_elems_ = static_cast<int64_t>(num_kv_heads_) * tokens_per_block * config_.head_dim;
  const size_t bytes = static_cast<size_t>(num_layers_) * 2 * static_cast<size_t>(num_blocks) *
                       static_cast<size_t>(block_elems_) * kv_element_bytes();
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
  check_kv_block_copy(src, dst, num_blocks_);
  if (src == dst) return;
  use_device();
  // Every layer's K and V array holds the block at the same offset, num_blocks blocks apart.
  const size_t es = kv_element_bytes(), block = static_cast<size_t>(block_elems_) * es;
  const size_t stride = static_cast<size_t>(num_blocks_) * block;
  char* base = kv_.as<char>();
  for (int32_t a = 0; a < 2 * num_layers_; ++a)
    check_cuda(cudaMemcpyAsync(base + a * stride + static_cast<size_t>(dst) * block,
                               base + a * stride + static_cast<size_t>(src) * block, block, cudaMemcpyDeviceToDevice,
                               stream_),
               "copy_kv_block");
}

}  // namespace engine::cuda
