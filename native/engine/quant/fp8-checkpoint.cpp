#include "quant/fp8-checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "errors.h"

namespace engine {
namespace {

std::string module_of(const std::string& name) {
  const std::string suffix = ".weight";
  return name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0
             ? name.substr(0, name.size() - suffix.size())
             : name;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Rows [r0, r1) and columns [c0, c1) of a [rows, cols] weight that `slice` selects.
struct Region {
  int64_t r0, r1, c0, c1;
};
Region region_of(int64_t rows, int64_t cols, const std::optional<TensorSlice>& slice) {
  Region g{0, rows, 0, cols};
  if (slice && slice->dim == 0) g.r0 = slice->begin, g.r1 = slice->end;
  if (slice && slice->dim == 1) g.c0 = slice->begin, g.c1 = slice->end;
  return g;
}

}  // namespace

float Fp8Tensors::Scales::at(int64_t r, int64_t c) const {
  switch (kind) {
    case Fp8ScaleKind::tensor: return v[0];
    case Fp8ScaleKind::channel: return v[static_cast<size_t>(r)];
    default: return v[static_cast<size_t>((r / b0) * block_cols + c / b1)];
  }
}

bool Fp8Tensors::is_fp8(const std::string& name) const {
  const TensorInfo& t = checkpoint_.info(name);
  if (t.dtype != DType::f8_e4m3) return false;
  if (!config_.quantized())
    throw EngineError(ErrorCode::bad_checkpoint, "tensor '" + name + "' is F8_E4M3 but " + checkpoint_.dir() +
                                                     " has no quantization_config (config.json) or "
                                                     "hf_quant_config.json saying how its scales are stored");
  if (t.shape.size() != 2)
    throw EngineError(ErrorCode::bad_checkpoint, "tensor '" + name + "' is F8_E4M3 with shape " +
                                                     shape_to_string(t.shape) + "; only 2-D weights can be FP8");
  return true;
}

std::vector<std::string> Fp8Tensors::companions(const std::string& name) const {
  std::vector<std::string> out;
  const std::string m = module_of(name);
  for (const std::string& n : {m + "." + config_.scale_suffix, m + ".input_scale"})
    if (checkpoint_.has(n)) out.push_back(n);
  return out;
}

Fp8Tensors::Scales Fp8Tensors::scales(const std::string& name, int64_t rows, int64_t cols) const {
  Scales s;
  s.kind = config_.weight_scale;
  const std::string scale_name = module_of(name) + "." + config_.scale_suffix;
  const TensorInfo& t = checkpoint_.info(scale_name);  // not_found names it
  s.v = checkpoint_.read_f32(scale_name, t.shape);
  auto bad = [&](const std::string& want) {
    return EngineError(ErrorCode::bad_checkpoint, "tensor '" + scale_name + "' has shape " + shape_to_string(t.shape) +
                                                      ", expected " + want + " for weight '" + name + "' of shape " +
                                                      shape_to_string({rows, cols}) + " (" + config_.source + ")");
  };
  const int64_t n = static_cast<int64_t>(s.v.size());
  if (s.kind == Fp8ScaleKind::tensor && n == rows && rows > 1) s.kind = Fp8ScaleKind::channel;  // stored per row
  switch (s.kind) {
    case Fp8ScaleKind::tensor:
      if (n != 1) throw bad("one value ([] or [1]) for per-tensor scales");
      break;
    case Fp8ScaleKind::channel:
      if (n != rows) throw bad("[" + std::to_string(rows) + ", 1] (one per output channel)");
      break;
    case Fp8ScaleKind::block:
      s.b0 = config_.block_rows;
      s.b1 = config_.block_cols;
      s.block_cols = ceil_div(cols, s.b1);
      if (t.shape.size() != 2 || t.shape[0] != ceil_div(rows, s.b0) || t.shape[1] != s.block_cols)
        throw bad(shape_to_string({ceil_div(rows, s.b0), s.block_cols}) + " (one per " + std::to_string(s.b0) + "x" +
                  std::to_string(s.b1) + " block)");
      break;
  }
  for (float v : s.v)
    if (!(v > 0) || !std::isfinite(v))
      throw EngineError(ErrorCode::bad_checkpoint, "tensor '" + scale_name + "' holds the scale " + std::to_string(v) +
                                                       "; scales must be positive and finite");
  if (config_.activation == Fp8Activation::static_tensor) {
    const std::string in_name = module_of(name) + ".input_scale";
    const TensorInfo& it = checkpoint_.info(in_name);
    const std::vector<float> in = checkpoint_.read_f32(in_name, it.shape);
    if (in.size() != 1) throw EngineError(ErrorCode::bad_checkpoint, "tensor '" + in_name + "' has shape " + shape_to_string(it.shape) + ", expected one value");
    s.input_scale = in[0];
  }
  return s;
}

void Fp8Tensors::dequantize_into(const std::string& name, const std::vector<int64_t>& shape, float* out,
                                 const std::optional<TensorSlice>& slice) const {
  checkpoint_.read_f32_into(name, shape, out, slice);  // the e4m3 values, shape-checked
  const Scales s = scales(name, shape[0], shape[1]);
  const Region g = region_of(shape[0], shape[1], slice);
  const int64_t w = g.c1 - g.c0;
  for (int64_t r = g.r0; r < g.r1; ++r) {
    float* row = out + (r - g.r0) * w;
    for (int64_t c = g.c0; c < g.c1; ++c) row[c - g.c0] *= s.at(r, c);
  }
}

std::optional<Fp8Matrix> Fp8Tensors::matrix(const std::string& name, const std::vector<int64_t>& shape,
                                            const std::optional<TensorSlice>& slice) const {
  const TensorInfo& t = checkpoint_.info(name);
  if (t.shape != shape)
    throw EngineError(ErrorCode::bad_checkpoint, "tensor '" + name + "' has shape " + shape_to_string(t.shape) +
                                                     ", expected " + shape_to_string(shape));
  const int64_t rows = shape[0], cols = shape[1];
  const Scales s = scales(name, rows, cols);
  const Region g = region_of(rows, cols, slice);
  Fp8Matrix m;
  m.rows = g.r1 - g.r0;
  m.cols = g.c1 - g.c0;
  m.activation = config_.activation;
  m.input_scale = s.input_scale;
  m.scale_kind = s.kind;
  switch (s.kind) {
    case Fp8ScaleKind::tensor: m.scales = s.v; break;
    case Fp8ScaleKind::channel: m.scales.assign(s.v.begin() + g.r0, s.v.begin() + g.r1); break;
    case Fp8ScaleKind::block: {
      const int32_t b = s.b0;
      auto edge = [&](int64_t v, int64_t full) { return v % b == 0 || v == full; };
      if (s.b0 != s.b1 || g.r0 % b != 0 || g.c0 % b != 0 || !edge(g.r1, rows) || !edge(g.c1, cols)) return std::nullopt;
      m.block = b;
      for (int64_t br = g.r0 / b; br < ceil_div(g.r1, b); ++br)
        for (int64_t bc = g.c0 / b; bc < ceil_div(g.c1, b); ++bc) m.scales.push_back(s.v[static_cast<size_t>(br * s.block_cols + bc)]);
      break;
    }
  }
  m.data.resize(static_cast<size_t>(m.rows * m.cols));
  for (int64_t r = 0; r < m.rows; ++r)
    std::memcpy(m.data.data() + r * m.cols, t.data + (g.r0 + r) * cols + g.c0, static_cast<size_t>(m.cols));
  return m;
}

std::optional<Fp8Matrix> fuse_rows(const std::vector<std::optional<Fp8Matrix>>& parts) {
  if (parts.empty()) return std::nullopt;
  for (const auto& p : parts)
    if (!p || p->cols != parts[0]->cols || p->activation != parts[0]->activation) return std::nullopt;
  if (parts.size() == 1) return parts[0];
  Fp8Matrix m;
  m.cols = parts[0]->cols;
  m.activation = parts[0]->activation;
  const bool block = parts[0]->scale_kind == Fp8ScaleKind::block;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Fp8Matrix& p = *parts[i];
    if ((p.scale_kind == Fp8ScaleKind::block) != block) return std::nullopt;
    if (block && (p.block != parts[0]->block || (i + 1 < parts.size() && p.rows % p.block != 0))) return std::nullopt;
  }
  m.scale_kind = block ? Fp8ScaleKind::block : Fp8ScaleKind::channel;
  m.block = block ? parts[0]->block : 128;
  m.input_scale = 0;
  for (const auto& p : parts) {
    m.rows += p->rows;
    m.data.insert(m.data.end(), p->data.begin(), p->data.end());
    if (block || p->scale_kind == Fp8ScaleKind::channel) m.scales.insert(m.scales.end(), p->scales.begin(), p->scales.end());
    else m.scales.insert(m.scales.end(), static_cast<size_t>(p->rows), p->scales[0]);
    m.input_scale = std::max(m.input_scale, p->input_scale);  // one activation scale for the shared input
  }
  if (m.activation != Fp8Activation::static_tensor) m.input_scale = 1.0f;
  return m;
}

}  // namespace engine
