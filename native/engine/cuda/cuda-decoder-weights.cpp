// Weights onto the GPU: a checkpoint's host tensors uploaded (and converted to the model dtype) through a bounded
// staging buffer, or dummy weights generated on the GPU from the same plan and hash as the CPU model's. FP8
// projections (Linear::fp8) go up as e4m3 bytes and scales; with --quantization fp8 the projections are quantized
// on the GPU per output channel after upload or generation, and their 16-bit copy is freed.
#include "cuda/cuda-decoder.h"

#include <algorithm>

namespace engine::cuda {
namespace {

constexpr size_t kStagingFloats = size_t{32} << 20;  // 128 MB of fp32 per upload step

}  // namespace

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
    if (!l.fp8.empty()) {
      upload_fp8(l.fp8, d.fp8, stream_);
      weight_bytes_ += d.fp8.bytes();
    } else {
      upload_matrix(l.w, d.w, false);
      if (quantize_fp8_) quantize_linear(d);
    }
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
    norm(l.q_norm, layers_[i].q_norm);
    norm(l.k_norm, layers_[i].k_norm);
    norm(l.post_attn_norm, layers_[i].post_attn_norm);  // Gemma 2; an empty host norm leaves the device one empty
    norm(l.post_mlp_norm, layers_[i].post_mlp_norm);
    lin(l.qkv, layers_[i].qkv);
    lin(l.o, layers_[i].o);
    lin(l.up, layers_[i].up);
    lin(l.down, layers_[i].down);
    if (!l.moe.empty()) upload_moe(l.moe, layers_[i].moe);
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

void CudaDecoder::quantize_linear(DLinear& d) {
  if (d.w.empty()) return;
  quantize_fp8(d.w.get(), dt_, d.out, d.in, d.fp8, stream_);
  check_cuda(cudaStreamSynchronize(stream_), "quantize weights to FP8");
  weight_bytes_ = weight_bytes_ - d.w.bytes() + d.fp8.bytes();
  d.w.reset(0);
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
    if (quantize_fp8_) quantize_linear(d);
    fill_matrix(l.b, seed, d.b, true);
  };
  fill_matrix(plan.embed, seed, embed_, false);
  fill_matrix(plan.pos_embed, seed, pos_embed_, false);
  layers_.resize(plan.layers.size());
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    const DummyLayer& l = plan.layers[i];
    norm(l.attn_norm, layers_[i].attn_norm);
    norm(l.mlp_norm, layers_[i].mlp_norm);
    if (l.q_norm.dim > 0) {
      norm(l.q_norm, layers_[i].q_norm);
      norm(l.k_norm, layers_[i].k_norm);
    }
    if (l.post_attn_norm.dim > 0) norm(l.post_attn_norm, layers_[i].post_attn_norm);
    if (l.post_mlp_norm.dim > 0) norm(l.post_mlp_norm, layers_[i].post_mlp_norm);
    lin(l.qkv, layers_[i].qkv);
    lin(l.o, layers_[i].o);
    lin(l.up, layers_[i].up);
    lin(l.down, layers_[i].down);
    if (!l.moe.experts.empty()) generate_moe(l.moe, seed, layers_[i].moe);
  }
  if (plan.has_final_norm) norm(plan.final_norm, final_norm_);
  fill_matrix(plan.lm_head, seed, lm_head_, false);
  check_cuda(cudaStreamSynchronize(stream_), "generate dummy weights");
  reserve(max_num_tokens_, max_batch_size_);
}

}  // namespace engine::cuda
