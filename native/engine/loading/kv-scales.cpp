#include "loading/kv-scales.h"

#include <cmath>

#include "errors.h"

namespace engine {
namespace {

// The first of `names` the checkpoint has, or "".
std::string first_present(const Checkpoint& c, const std::vector<std::string>& names) {
  for (const std::string& n : names)
    if (c.has(n)) return n;
  return "";
}

float scalar(const Checkpoint& c, const std::string& name) {
  const TensorInfo& info = c.info(name);
  if (info.numel() != 1)
    throw EngineError(ErrorCode::bad_checkpoint, "tensor " + name + " must hold one scale, got " +
                                                     std::to_string(info.numel()) + " values");
  const float v = c.read_f32(name, info.shape)[0];
  if (!std::isfinite(v) || v <= 0)
    throw EngineError(ErrorCode::bad_checkpoint, "tensor " + name + " must be a positive finite scale, got " +
                                                     std::to_string(v));
  return v;
}

}  // namespace

bool wants_fp8_kv(const std::string& requested, bool checkpoint_says_fp8) {
  if (requested == "fp8") return true;
  if (requested == "auto") return checkpoint_says_fp8;
  throw EngineError(ErrorCode::invalid_argument, "kv_cache_dtype must be auto or fp8, got '" + requested + "'");
}

KvScales read_kv_scales(const Checkpoint& checkpoint, const ParallelLayout& layout) {
  KvScales out;
  std::string missing;
  for (int32_t l = layout.layer_begin; l < layout.layer_end; ++l) {
    const std::string attn = "model.layers." + std::to_string(l) + ".self_attn.";
    const std::string k = first_present(checkpoint, {attn + "k_scale", attn + "k_proj.k_scale"});
    const std::string v = first_present(checkpoint, {attn + "v_scale", attn + "v_proj.v_scale"});
    if (k.empty() || v.empty()) {
      if (missing.empty()) missing = attn + (k.empty() ? "k_scale" : "v_scale");
      continue;
    }
    out.k.push_back(scalar(checkpoint, k));
    out.v.push_back(scalar(checkpoint, v));
  }
  if (out.k.empty()) {
    out.from = "1 (the checkpoint has none)";
    return out;
  }
  if (!missing.empty())
    throw EngineError(ErrorCode::bad_checkpoint, "the checkpoint has FP8 KV scales for some layers but not " + missing +
                                                     " (nor its k_proj / v_proj form)");
  out.from = "from the checkpoint";
  return out;
}

}  // namespace engine
