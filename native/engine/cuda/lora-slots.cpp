#include "cuda/lora-slots.h"

#include <algorithm>
#include <string>

#include "errors.h"

namespace engine::cuda {
namespace {

constexpr size_t kStagingFloats = size_t{16} << 20;  // 64 MB of fp32 per upload step

int32_t pad_rank(int32_t r) { return (r + kLoraRankAlign - 1) / kLoraRankAlign * kLoraRankAlign; }

const char* target_name(int32_t t) {
  switch (static_cast<LoraTarget>(t)) {
    case LoraTarget::qkv: return "qkv";
    case LoraTarget::o: return "o";
    case LoraTarget::up: return "up";
    case LoraTarget::down: return "down";
  }
  return "?";
}

std::string s(int64_t v) { return std::to_string(v); }

}  // namespace

void DeviceLoraSlots::init(std::vector<std::array<LoraProjection, kLoraTargetCount>> widths, DType dt) {
  widths_ = std::move(widths);
  layers_ = static_cast<int32_t>(widths_.size());
  dt_ = dt;
  rank_bound_.assign(static_cast<size_t>(layers_) * kLoraTargetCount, 0);
  initialized_ = true;
}

void DeviceLoraSlots::grow_table(int32_t slots, cudaStream_t st) {
  if (slots <= capacity_) return;
  const int32_t cap = (slots + 7) / 8 * 8;  // fewer regrowths (each drops the decoder's graphs)
  host_table_.resize(static_cast<size_t>(cap) * static_cast<size_t>(slot_stride()));
  DeviceBuffer table(std::max<size_t>(host_table_.size(), 1) * sizeof(LoraTargetDesc));
  if (!host_table_.empty())
    check_cuda(cudaMemcpyAsync(table.get(), host_table_.data(), host_table_.size() * sizeof(LoraTargetDesc),
                               cudaMemcpyHostToDevice, st),
               "upload LoRA table");
  check_cuda(cudaStreamSynchronize(st), "upload LoRA table");
  table_ = std::move(table);
  mem_.resize(static_cast<size_t>(cap));
  capacity_ = cap;
  ++epoch_;
}

void DeviceLoraSlots::upload_slot(int32_t slot, cudaStream_t st) {
  const size_t n = static_cast<size_t>(slot_stride());
  if (n == 0) return;
  const size_t first = static_cast<size_t>(slot) * n;
  // On the decoder's stream and waited for: the next step's kernels must see it (a plain cudaMemcpy from pageable
  // memory may return before its DMA landed, and the decoder's stream does not wait for the legacy stream).
  check_cuda(cudaMemcpyAsync(table_.as<LoraTargetDesc>() + first, host_table_.data() + first,
                             n * sizeof(LoraTargetDesc), cudaMemcpyHostToDevice, st),
             "upload LoRA table");
  check_cuda(cudaStreamSynchronize(st), "upload LoRA table");
}

void DeviceLoraSlots::load(int32_t slot, const LoraLocal& local, cudaStream_t st) {
  if (slot < 0) throw EngineError(ErrorCode::internal, "LoRA slot " + s(slot) + " is negative");
  if (static_cast<int32_t>(local.layers.size()) != layers_)
    throw EngineError(ErrorCode::internal, "LoRA slice has " + s(static_cast<int64_t>(local.layers.size())) +
                                               " layers, this rank holds " + s(layers_));
  // Plan the slot's buffer: per (layer, target) the segments' A stacked (ranks padded to kLoraRankAlign with zero
  // rows), then each segment's B [out, padded rank]; offsets in elements (all multiples of 8: 16-byte aligned).
  const size_t stride = static_cast<size_t>(slot_stride());
  std::vector<LoraTargetDesc> desc(stride);
  std::vector<size_t> a_off(stride, 0), b_off(stride * kLoraMaxSegments, 0);
  size_t total = 0;
  for (int32_t l = 0; l < layers_; ++l)
    for (int32_t tg = 0; tg < kLoraTargetCount; ++tg) {
      const std::vector<LoraSegment>& segs = local.layers[l][tg];
      if (segs.empty()) continue;
      const std::string where = "LoRA adapter, local layer " + s(l) + " " + target_name(tg) + ": ";
      const LoraProjection& p = widths_[l][tg];
      if (p.out == 0) throw EngineError(ErrorCode::invalid_argument, where + "this layer has no such projection");
      if (static_cast<int32_t>(segs.size()) > kLoraMaxSegments)
        throw EngineError(ErrorCode::invalid_argument, where + s(static_cast<int64_t>(segs.size())) +
                                                           " segments, the CUDA kernels take " + s(kLoraMaxSegments));
      if (p.in % 8 != 0)
        throw EngineError(ErrorCode::unsupported, where + "input width " + s(p.in) + " is not a multiple of 8");
      const size_t e = static_cast<size_t>(l) * kLoraTargetCount + static_cast<size_t>(tg);
      LoraTargetDesc& d = desc[e];
      int32_t rt = 0;
      for (size_t i = 0; i < segs.size(); ++i) {
        const LoraSegment& sg = segs[i];
        if (sg.in != p.in || sg.out_offset < 0 || sg.out < 1 || sg.out_offset + sg.out > p.out || sg.rank < 1 ||
            static_cast<int64_t>(sg.a.size()) != sg.rank * sg.in ||
            static_cast<int64_t>(sg.b.size()) != sg.out * sg.rank)
          throw EngineError(ErrorCode::invalid_argument,
                            where + "segment " + s(static_cast<int64_t>(i)) + " (rank " + s(sg.rank) + ", in " +
                                s(sg.in) + ", out " + s(sg.out) + " at " + s(sg.out_offset) +
                                ") does not fit the projection (in " + s(p.in) + ", out " + s(p.out) + ")");
        d.seg[i].out_offset = static_cast<int32_t>(sg.out_offset);
        d.seg[i].out = static_cast<int32_t>(sg.out);
        d.seg[i].t_offset = rt;
        d.seg[i].rank = pad_rank(sg.rank);
        rt += pad_rank(sg.rank);
      }
      if (rt > kLoraMaxRank)
        throw EngineError(ErrorCode::invalid_argument, where + "ranks add up to " + s(rt) + " (padded to multiples of " +
                                                           s(kLoraRankAlign) + "), the CUDA kernels take " +
                                                           s(kLoraMaxRank));
      d.rank = rt;
      d.n_seg = static_cast<int32_t>(segs.size());
      a_off[e] = total;
      total += static_cast<size_t>(rt) * static_cast<size_t>(p.in);
      for (size_t i = 0; i < segs.size(); ++i) {
        b_off[e * kLoraMaxSegments + i] = total;
        total += static_cast<size_t>(segs[i].out) * static_cast<size_t>(d.seg[i].rank);
      }
    }

  // The whole slot in fp32 on the host, zero padded.
  std::vector<float> host(total, 0.0f);
  for (int32_t l = 0; l < layers_; ++l)
    for (int32_t tg = 0; tg < kLoraTargetCount; ++tg) {
      const size_t e = static_cast<size_t>(l) * kLoraTargetCount + static_cast<size_t>(tg);
      const std::vector<LoraSegment>& segs = local.layers[l][tg];
      for (size_t i = 0; i < segs.size(); ++i) {
        const LoraSegment& sg = segs[i];
        const LoraSegDesc& sd = desc[e].seg[i];
        float* a = host.data() + a_off[e] + static_cast<size_t>(sd.t_offset) * static_cast<size_t>(sg.in);
        std::copy(sg.a.begin(), sg.a.end(), a);  // [rank, in] rows, then zero rows up to the padded rank
        float* b = host.data() + b_off[e * kLoraMaxSegments + i];
        for (int64_t c = 0; c < sg.out; ++c)
          std::copy(sg.b.begin() + c * sg.rank, sg.b.begin() + (c + 1) * sg.rank, b + c * sd.rank);
      }
    }

  // No step may still read what the slot held (the executor never loads a slot a running chunk uses, but the
  // previous step's kernels may not have finished).
  check_cuda(cudaStreamSynchronize(st), "LoRA load");
  grow_table(slot + 1, st);
  const bool was_loaded = loaded(slot);
  mem_[slot].reset(0);
  const size_t es = dtype_size(dt_);
  if (total > 0) {
    mem_[slot].reset(total * es);
    DeviceBuffer staging(std::min(total, kStagingFloats) * sizeof(float));
    for (size_t at = 0; at < total; at += kStagingFloats) {
      const size_t len = std::min(kStagingFloats, total - at);
      check_cuda(cudaMemcpyAsync(staging.get(), host.data() + at, len * sizeof(float), cudaMemcpyHostToDevice, st),
                 "upload LoRA weights");
      convert(staging.as<float>(), mem_[slot].as<char>() + at * es, dt_, static_cast<int64_t>(len), st);
      check_cuda(cudaStreamSynchronize(st), "convert LoRA weights");
    }
  }
  const char* base = mem_[slot].as<char>();
  for (size_t e = 0; e < stride; ++e) {
    LoraTargetDesc& d = desc[e];
    if (d.rank == 0) continue;
    d.a = base + a_off[e] * es;
    for (int32_t i = 0; i < d.n_seg; ++i) d.seg[i].b = base + b_off[e * kLoraMaxSegments + i] * es;
    if (d.rank > rank_bound_[e]) {
      rank_bound_[e] = d.rank;
      ++epoch_;
    }
    if (d.rank > t_stride_) {
      t_stride_ = d.rank;
      ++epoch_;
    }
  }
  std::copy(desc.begin(), desc.end(), host_table_.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(slot) * stride));
  upload_slot(slot, st);
  if (!was_loaded && loaded(slot)) ++loaded_;
  if (was_loaded && !loaded(slot)) --loaded_;
}

void DeviceLoraSlots::unload(int32_t slot, cudaStream_t st) {
  if (!loaded(slot)) return;
  check_cuda(cudaStreamSynchronize(st), "LoRA unload");
  const size_t stride = static_cast<size_t>(slot_stride());
  std::fill(host_table_.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(slot) * stride),
            host_table_.begin() + static_cast<ptrdiff_t>(static_cast<size_t>(slot + 1) * stride), LoraTargetDesc{});
  upload_slot(slot, st);
  mem_[slot].reset(0);
  --loaded_;
}

size_t DeviceLoraSlots::bytes() const {
  size_t n = table_.bytes();
  for (const DeviceBuffer& b : mem_) n += b.bytes();
  return n;
}

}  // namespace engine::cuda
