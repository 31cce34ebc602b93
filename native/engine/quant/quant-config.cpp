#include "quant/quant-config.h"

#include <sys/stat.h>

#include "errors.h"
#include "loading/json.h"

namespace engine {
namespace {

const char* kSupportedMethods =
    "supported: \"fp8\", \"compressed-tensors\" float-quantized FP8, \"modelopt\" FP8 (or hf_quant_config.json "
    "quant_algo FP8)";

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

[[noreturn]] void refuse(const std::string& where, const std::string& key, const std::string& value,
                         const std::string& why) {
  throw EngineError(ErrorCode::unsupported, where + key + " " + value + " is not supported" +
                                                (why.empty() ? "" : " (" + why + ")"));
}

std::string quoted(const std::string& s) { return "\"" + s + "\""; }

std::string value_text(const json::Value* v) {
  if (!v || v->is_null()) return "null";
  if (v->is_string()) return quoted(v->as_string());
  if (v->is_bool()) return v->as_bool() ? "true" : "false";
  if (v->is_integer()) return std::to_string(v->as_int64());
  if (v->is_number()) return std::to_string(v->as_number());
  return v->is_array() ? "[...]" : "{...}";
}

std::vector<std::string> strings(const json::Value* v, const std::string& what) {
  std::vector<std::string> out;
  if (!v || v->is_null()) return out;
  for (const json::Value& s : v->as_array(what)) out.push_back(s.as_string(what));
  return out;
}

// [rows, cols] of a weight_block_size / block_structure.
void read_block(const json::Value& v, const std::string& what, QuantConfig& q) {
  const auto& a = v.as_array(what);
  if (a.size() != 2) throw EngineError(ErrorCode::bad_checkpoint, what + " must be [rows, cols], got " + std::to_string(a.size()) + " numbers");
  q.block_rows = static_cast<int32_t>(a[0].as_int64(what));
  q.block_cols = static_cast<int32_t>(a[1].as_int64(what));
  if (q.block_rows <= 0 || q.block_cols <= 0)
    throw EngineError(ErrorCode::bad_checkpoint, what + " must be positive, got [" + std::to_string(q.block_rows) +
                                                     ", " + std::to_string(q.block_cols) + "]");
  q.weight_scale = Fp8ScaleKind::block;
}

void read_hf_fp8(const json::Value& qc, const std::string& w, QuantConfig& q) {
  q.method = QuantMethod::hf_fp8;
  q.scale_suffix = "weight_scale_inv";
  const json::Value* scheme = qc.find("activation_scheme");
  const std::string s = scheme && !scheme->is_null() ? scheme->as_string(w + ".activation_scheme") : "dynamic";
  if (s != "dynamic") refuse(w, ".activation_scheme", quoted(s), "only \"dynamic\" FP8 checkpoints carry no input scales we read");
  const json::Value* block = qc.find("weight_block_size");
  if (block && !block->is_null()) {
    read_block(*block, w + ".weight_block_size", q);
    q.activation = Fp8Activation::dynamic_token_group;
  } else {
    q.weight_scale = Fp8ScaleKind::tensor;
    q.activation = Fp8Activation::dynamic_token;
  }
  for (const char* k : {"modules_to_not_convert", "ignored_layers"})
    for (const std::string& m : strings(qc.find(k), w + "." + k)) q.ignore.push_back(m);
}

void read_compressed_tensors(const json::Value& qc, const std::string& w, QuantConfig& q) {
  q.method = QuantMethod::compressed_tensors;
  const json::Value* fmt = qc.find("format");
  const std::string f = fmt && !fmt->is_null() ? fmt->as_string(w + ".format") : "";
  if (f != "float-quantized" && f != "naive-quantized")
    refuse(w, ".format", quoted(f), "supported: \"float-quantized\" FP8 weights");
  const json::Value* groups = qc.find("config_groups");
  if (!groups || !groups->is_object() || groups->as_object().empty())
    throw EngineError(ErrorCode::bad_checkpoint, w + " has no config_groups");
  bool first = true;
  for (const auto& [name, g] : groups->as_object()) {
    const std::string gw = w + ".config_groups." + name;
    const json::Value* weights = g.find("weights");
    if (!weights || weights->is_null()) throw EngineError(ErrorCode::bad_checkpoint, gw + " has no \"weights\"");
    auto field = [&](const json::Value& o, const char* k) { return o.find(k); };
    const json::Value* bits = field(*weights, "num_bits");
    if (!bits || bits->as_int64(gw + ".weights.num_bits") != 8) refuse(gw, ".weights.num_bits", value_text(bits), "only 8-bit FP8 weights");
    const json::Value* type = field(*weights, "type");
    if (!type || type->as_string(gw + ".weights.type") != "float") refuse(gw, ".weights.type", value_text(type), "only \"float\" (FP8); integer weights are not supported");
    const json::Value* sym = field(*weights, "symmetric");
    if (sym && !sym->is_null() && !sym->as_bool(gw + ".weights.symmetric")) refuse(gw, ".weights.symmetric", "false", "FP8 weights are symmetric");
    const json::Value* strategy = field(*weights, "strategy");
    const std::string st = strategy && !strategy->is_null() ? strategy->as_string(gw + ".weights.strategy") : "tensor";
    QuantConfig g_q = q;
    if (st == "tensor") g_q.weight_scale = Fp8ScaleKind::tensor;
    else if (st == "channel") g_q.weight_scale = Fp8ScaleKind::channel;
    else if (st == "block") {
      const json::Value* bs = field(*weights, "block_structure");
      if (!bs || bs->is_null()) throw EngineError(ErrorCode::bad_checkpoint, gw + ".weights strategy \"block\" lacks block_structure");
      read_block(*bs, gw + ".weights.block_structure", g_q);
    } else refuse(gw, ".weights.strategy", quoted(st), "supported: \"tensor\", \"channel\", \"block\"");
    const json::Value* acts = g.find("input_activations");
    if (!acts || acts->is_null()) {
      g_q.activation = g_q.weight_scale == Fp8ScaleKind::block ? Fp8Activation::dynamic_token_group : Fp8Activation::dynamic_token;
    } else {
      const json::Value* abits = field(*acts, "num_bits");
      if (!abits || abits->as_int64(gw + ".input_activations.num_bits") != 8) refuse(gw, ".input_activations.num_bits", value_text(abits), "only 8-bit FP8 activations");
      const json::Value* atype = field(*acts, "type");
      if (!atype || atype->as_string(gw + ".input_activations.type") != "float") refuse(gw, ".input_activations.type", value_text(atype), "only \"float\" (FP8)");
      const json::Value* dyn = field(*acts, "dynamic");
      const bool dynamic = dyn && !dyn->is_null() && (dyn->is_bool() ? dyn->as_bool() : false);
      const json::Value* astr = field(*acts, "strategy");
      const std::string as = astr && !astr->is_null() ? astr->as_string(gw + ".input_activations.strategy") : "tensor";
      if (as == "token") g_q.activation = Fp8Activation::dynamic_token;
      else if (as == "group") g_q.activation = Fp8Activation::dynamic_token_group;
      else if (as == "tensor") g_q.activation = dynamic ? Fp8Activation::dynamic_token : Fp8Activation::static_tensor;
      else refuse(gw, ".input_activations.strategy", quoted(as), "supported: \"token\", \"tensor\", \"group\"");
    }
    if (!first && (g_q.weight_scale != q.weight_scale || g_q.activation != q.activation || g_q.block_rows != q.block_rows))
      refuse(w, ".config_groups", "with different schemes", "one FP8 scheme for every quantized module");
    q = g_q;
    first = false;
  }
  for (const std::string& m : strings(qc.find("ignore"), w + ".ignore")) q.ignore.push_back(m);
  if (const json::Value* kv = qc.find("kv_cache_scheme"); kv && !kv->is_null()) q.kv_cache_fp8 = true;
}

void read_modelopt(const std::string& algo, const json::Value* exclude, const std::string& w, QuantConfig& q) {
  if (algo != "FP8") refuse(w, ".quant_algo", quoted(algo), "supported: \"FP8\" (per-tensor scales)");
  q.method = QuantMethod::modelopt;
  q.weight_scale = Fp8ScaleKind::tensor;
  q.activation = Fp8Activation::static_tensor;
  q.ignore = strings(exclude, w + ".exclude_modules");
}

const char* scale_text(const QuantConfig& q) {
  switch (q.weight_scale) {
    case Fp8ScaleKind::tensor: return "per-tensor";
    case Fp8ScaleKind::channel: return "per-channel";
    default: return "block";
  }
}

const char* activation_text(Fp8Activation a) {
  switch (a) {
    case Fp8Activation::dynamic_token: return "dynamic per-token";
    case Fp8Activation::dynamic_token_group: return "dynamic per-token-group";
    default: return "static per-tensor";
  }
}

}  // namespace

std::string QuantConfig::describe() const {
  if (method == QuantMethod::none) return "";
  const char* name = method == QuantMethod::hf_fp8 ? "HF fp8" : method == QuantMethod::compressed_tensors ? "compressed-tensors" : "ModelOpt";
  std::string scales = scale_text(*this);
  if (weight_scale == Fp8ScaleKind::block) scales += " " + std::to_string(block_rows) + "x" + std::to_string(block_cols);
  return std::string("fp8 (") + name + ", " + scales + " weight scales, " + activation_text(activation) + " activations)";
}

QuantConfig read_quant_config(const json::Value& doc, const std::string& config_path, const std::string& dir) {
  QuantConfig q;
  const json::Value* qc = doc.find("quantization_config");
  if (qc && !qc->is_null()) {
    const std::string w = config_path + ": quantization_config";
    qc->as_object(w);
    q.source = w;
    const json::Value* m = qc->find("quant_method");
    if (!m || m->is_null()) throw EngineError(ErrorCode::bad_checkpoint, w + " lacks quant_method");
    const std::string method = m->as_string(w + ".quant_method");
    if (method == "fp8") read_hf_fp8(*qc, w, q);
    else if (method == "compressed-tensors") read_compressed_tensors(*qc, w, q);
    else if (method == "modelopt") {
      const json::Value* algo = qc->find("quant_algo");
      read_modelopt(algo && algo->is_string() ? algo->as_string() : value_text(algo), qc->find("exclude_modules"), w, q);
    } else refuse(w, ".quant_method", quoted(method), kSupportedMethods);
  }
  const std::string hf_quant = dir + "/hf_quant_config.json";
  if (file_exists(hf_quant)) {
    const json::Value mo = json::parse_file(hf_quant);
    const json::Value* quant = mo.find("quantization");
    if (!quant || !quant->is_object()) throw EngineError(ErrorCode::bad_checkpoint, hf_quant + " has no \"quantization\" object");
    const std::string w = hf_quant + ": quantization";
    const json::Value* algo = quant->find("quant_algo");
    const std::string a = algo && algo->is_string() ? algo->as_string() : value_text(algo);
    if (q.quantized() && q.method != QuantMethod::modelopt)
      throw EngineError(ErrorCode::bad_checkpoint, hf_quant + " and " + q.source + " both describe the quantization");
    if (!q.quantized()) {
      read_modelopt(a, quant->find("exclude_modules"), w, q);
      q.source = w;
    }
    const json::Value* kv = quant->find("kv_cache_quant_algo");
    if (kv && kv->is_string()) {
      if (kv->as_string() != "FP8") refuse(w, ".kv_cache_quant_algo", quoted(kv->as_string()), "supported: null, \"FP8\"");
      q.kv_cache_fp8 = true;
    }
  }
  return q;
}

}  // namespace engine
