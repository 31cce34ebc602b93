// The CPU models against themselves and against a plain-loop reference written here: batching, chunked prefill,
// decode, block placement and the naive math must all agree. Checkpoints are random and written by the test.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <random>

#include "check.h"
#include "errors.h"
#include "loading/safetensors.h"
#include "model/model.h"
#include "temp-dir.h"

using namespace engine;

namespace {

using Tensors = std::map<std::string, std::vector<float>>;
using Shapes = std::map<std::string, std::vector<int64_t>>;

// Random weights, rounded to the storage dtype so the reference sees exactly what the engine loads.
struct TinyCheckpoint {
  std::string dir;
  Tensors t;
  Shapes shapes;
  DType dtype = DType::f32;
  std::mt19937 rng{1234};

  void add(const std::string& name, std::vector<int64_t> shape, float scale, float offset = 0) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::uniform_real_distribution<float> u(-scale, scale);
    std::vector<float> v(n);
    for (auto& x : v) {
      x = offset + u(rng);
      if (dtype == DType::f16) x = f16_to_f32(f32_to_f16(x));
      if (dtype == DType::bf16) x = bf16_to_f32(f32_to_bf16(x));
    }
    t[name] = v;
    shapes[name] = shape;
  }

  void write(const std::string& config_json) {
    dir = test::make_temp_dir("model-forward");
    std::ofstream(dir + "/config.json") << config_json;
    std::vector<TensorToWrite> out;
    for (const auto& [name, v] : t) {
      TensorToWrite w{name, dtype, shapes[name], {}};
      for (float f : v) {
        if (dtype == DType::f32) {
          uint8_t b[4];
          std::memcpy(b, &f, 4);
          w.bytes.insert(w.bytes.end(), b, b + 4);
        } else {
          uint16_t h = dtype == DType::f16 ? f32_to_f16(f) : f32_to_bf16(f);
          w.bytes.push_back(static_cast<uint8_t>(h));
          w.bytes.push_back(static_cast<uint8_t>(h >> 8));
        }
      }
      out.push_back(std::move(w));
    }
    write_safetensors(dir + "/model.safetensors", out);
  }
};

// ---- Tiny Llama: GQA (4 heads, 2 kv heads), llama3 rope scaling, q/k/v/o biases, untied lm_head ----
constexpr int V = 61, H = 32, L = 2, NH = 4, NKV = 2, HD = 8, I = 48;

TinyCheckpoint make_llama() {
  TinyCheckpoint c;
  c.dtype = DType::bf16;
  c.add("model.embed_tokens.weight", {V, H}, 1.0f);
  for (int l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    c.add(p + "input_layernorm.weight", {H}, 0.2f, 1.0f);
    c.add(p + "post_attention_layernorm.weight", {H}, 0.2f, 1.0f);
    c.add(p + "self_attn.q_proj.weight", {NH * HD, H}, 0.4f);
    c.add(p + "self_attn.k_proj.weight", {NKV * HD, H}, 0.4f);
    c.add(p + "self_attn.v_proj.weight", {NKV * HD, H}, 0.3f);
    c.add(p + "self_attn.o_proj.weight", {H, NH * HD}, 0.3f);
    c.add(p + "self_attn.q_proj.bias", {NH * HD}, 0.2f);
    c.add(p + "self_attn.k_proj.bias", {NKV * HD}, 0.2f);
    c.add(p + "self_attn.v_proj.bias", {NKV * HD}, 0.2f);
    c.add(p + "self_attn.o_proj.bias", {H}, 0.2f);
    c.add(p + "mlp.gate_proj.weight", {I, H}, 0.3f);
    c.add(p + "mlp.up_proj.weight", {I, H}, 0.3f);
    c.add(p + "mlp.down_proj.weight", {H, I}, 0.3f);
  }
  c.add("model.norm.weight", {H}, 0.2f, 1.0f);
  c.add("lm_head.weight", {V, H}, 0.5f);
  c.write(R"({"architectures":["LlamaForCausalLM"],"vocab_size":61,"hidden_size":32,"num_hidden_layers":2,)"
          R"("num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":48,"rms_norm_eps":1e-5,)"
          R"("rope_theta":10000.0,"attention_bias":true,"max_position_embeddings":128,"hidden_act":"silu",)"
          R"("rope_scaling":{"rope_type":"llama3","factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,)"
          R"("original_max_position_embeddings":16},"tie_word_embeddings":false})");
  return c;
}

// ---- Tiny GPT-2 (f16, "transformer." prefix, with the attn.bias buffer older exports carry) ----
constexpr int GV = 53, GH = 24, GL = 2, GNH = 3, GP = 40, GI = 96;

TinyCheckpoint make_gpt2() {
  TinyCheckpoint c;
  c.dtype = DType::f16;
  c.add("transformer.wte.weight", {GV, GH}, 1.0f);
  c.add("transformer.wpe.weight", {GP, GH}, 0.5f);
  for (int l = 0; l < GL; ++l) {
    const std::string p = "transformer.h." + std::to_string(l) + ".";
    c.add(p + "ln_1.weight", {GH}, 0.2f, 1.0f);
    c.add(p + "ln_1.bias", {GH}, 0.1f);
    c.add(p + "ln_2.weight", {GH}, 0.2f, 1.0f);
    c.add(p + "ln_2.bias", {GH}, 0.1f);
    c.add(p + "attn.c_attn.weight", {GH, 3 * GH}, 0.4f);
    c.add(p + "attn.c_attn.bias", {3 * GH}, 0.2f);
    c.add(p + "attn.c_proj.weight", {GH, GH}, 0.3f);
    c.add(p + "attn.c_proj.bias", {GH}, 0.1f);
    c.add(p + "mlp.c_fc.weight", {GH, GI}, 0.3f);
    c.add(p + "mlp.c_fc.bias", {GI}, 0.1f);
    c.add(p + "mlp.c_proj.weight", {GI, GH}, 0.2f);
    c.add(p + "mlp.c_proj.bias", {GH}, 0.1f);
    c.add(p + "attn.bias", {1, 1, GP, GP}, 1.0f);
  }
  c.add("transformer.ln_f.weight", {GH}, 0.2f, 1.0f);
  c.add("transformer.ln_f.bias", {GH}, 0.1f);
  c.write(R"({"architectures":["GPT2LMHeadModel"],"vocab_size":53,"n_embd":24,"n_layer":2,"n_head":3,)"
          R"("n_positions":40,"n_inner":null,"layer_norm_epsilon":1e-5,"activation_function":"gelu_new"})");
  return c;
}

// ---- Plain-loop references in double precision: no paging, no batching, no fusion ----
using Mat = std::vector<std::vector<double>>;

Mat linear(const Mat& x, const std::vector<float>& w, int out, int in, const std::vector<float>* b) {
  Mat y(x.size(), std::vector<double>(out));
  for (size_t t = 0; t < x.size(); ++t)
    for (int o = 0; o < out; ++o) {
      double s = b ? (*b)[o] : 0.0;
      for (int i = 0; i < in; ++i) s += x[t][i] * w[o * in + i];
      y[t][o] = s;
    }
  return y;
}

Mat conv1d(const Mat& x, const std::vector<float>& w, int in, int out, const std::vector<float>& b) {
  Mat y(x.size(), std::vector<double>(out));
  for (size_t t = 0; t < x.size(); ++t)
    for (int o = 0; o < out; ++o) {
      double s = b[o];
      for (int i = 0; i < in; ++i) s += x[t][i] * w[i * out + o];
      y[t][o] = s;
    }
  return y;
}

Mat attention(const Mat& q, const Mat& k, const Mat& v, int nh, int nkv, int hd) {
  const size_t n = q.size();
  Mat out(n, std::vector<double>(nh * hd, 0.0));
  for (int h = 0; h < nh; ++h) {
    const int g = h / (nh / nkv);
    for (size_t i = 0; i < n; ++i) {
      std::vector<double> s(i + 1);
      double m = -1e300;
      for (size_t j = 0; j <= i; ++j) {
        double d = 0;
        for (int e = 0; e < hd; ++e) d += q[i][h * hd + e] * k[j][g * hd + e];
        s[j] = d / std::sqrt(static_cast<double>(hd));
        m = std::max(m, s[j]);
      }
      double z = 0;
      for (auto& x : s) z += (x = std::exp(x - m));
      for (size_t j = 0; j <= i; ++j)
        for (int e = 0; e < hd; ++e) out[i][h * hd + e] += s[j] / z * v[j][g * hd + e];
    }
  }
  return out;
}

void add(Mat& x, const Mat& y) {
  for (size_t t = 0; t < x.size(); ++t)
    for (size_t i = 0; i < x[t].size(); ++i) x[t][i] += y[t][i];
}

std::vector<double> flatten(const Mat& m) {
  std::vector<double> r;
  for (const auto& row : m) r.insert(r.end(), row.begin(), row.end());
  return r;
}

std::vector<double> naive_llama(const Tensors& t, const std::vector<int32_t>& tokens) {
  const size_t n = tokens.size();
  Mat x(n);
  for (size_t i = 0; i < n; ++i)
    x[i].assign(t.at("model.embed_tokens.weight").begin() + tokens[i] * H,
                t.at("model.embed_tokens.weight").begin() + (tokens[i] + 1) * H);
  auto rms = [&](const Mat& a, const std::vector<float>& w) {
    Mat r = a;
    for (auto& row : r) {
      double ss = 0;
      for (double v : row) ss += v * v;
      double inv = 1.0 / std::sqrt(ss / H + 1e-5);
      for (int i = 0; i < H; ++i) row[i] = row[i] * inv * w[i];
    }
    return r;
  };
  // llama3 frequencies, written out from transformers' _compute_llama3_parameters
  std::vector<double> inv_freq(HD / 2);
  const double pi = 3.141592653589793, factor = 8, low = 1, high = 4, old_ctx = 16;
  for (int i = 0; i < HD / 2; ++i) {
    double f = 1.0 / std::pow(10000.0, 2.0 * i / HD);
    double wavelen = 2 * pi / f;
    double scaled = wavelen > old_ctx / low ? f / factor : f;
    double smooth = (old_ctx / wavelen - low) / (high - low);
    double smoothed = (1 - smooth) * scaled / factor + smooth * scaled;
    bool medium = !(wavelen < old_ctx / high) && !(wavelen > old_ctx / low);
    inv_freq[i] = medium ? smoothed : scaled;
  }
  auto rope = [&](Mat& a, int heads) {
    for (size_t p = 0; p < n; ++p)
      for (int h = 0; h < heads; ++h)
        for (int i = 0; i < HD / 2; ++i) {
          double c = std::cos(p * inv_freq[i]), s = std::sin(p * inv_freq[i]);
          double& x1 = a[p][h * HD + i];
          double& x2 = a[p][h * HD + i + HD / 2];
          double a1 = x1 * c - x2 * s, a2 = x2 * c + x1 * s;
          x1 = a1;
          x2 = a2;
        }
  };
  for (int l = 0; l < L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    Mat xn = rms(x, t.at(p + "input_layernorm.weight"));
    Mat q = linear(xn, t.at(p + "self_attn.q_proj.weight"), NH * HD, H, &t.at(p + "self_attn.q_proj.bias"));
    Mat k = linear(xn, t.at(p + "self_attn.k_proj.weight"), NKV * HD, H, &t.at(p + "self_attn.k_proj.bias"));
    Mat v = linear(xn, t.at(p + "self_attn.v_proj.weight"), NKV * HD, H, &t.at(p + "self_attn.v_proj.bias"));
    rope(q, NH);
    rope(k, NKV);
    Mat a = attention(q, k, v, NH, NKV, HD);
    add(x, linear(a, t.at(p + "self_attn.o_proj.weight"), H, NH * HD, &t.at(p + "self_attn.o_proj.bias")));
    xn = rms(x, t.at(p + "post_attention_layernorm.weight"));
    Mat g = linear(xn, t.at(p + "mlp.gate_proj.weight"), I, H, nullptr);
    Mat u = linear(xn, t.at(p + "mlp.up_proj.weight"), I, H, nullptr);
    for (size_t r = 0; r < n; ++r)
      for (int i = 0; i < I; ++i) g[r][i] = g[r][i] / (1 + std::exp(-g[r][i])) * u[r][i];
    add(x, linear(g, t.at(p + "mlp.down_proj.weight"), H, I, nullptr));
  }
  return flatten(linear(rms(x, t.at("model.norm.weight")), t.at("lm_head.weight"), V, H, nullptr));
}

std::vector<double> naive_gpt2(const Tensors& t, const std::vector<int32_t>& tokens) {
  const size_t n = tokens.size();
  const std::string P = "transformer.";
  Mat x(n, std::vector<double>(GH));
  for (size_t i = 0; i < n; ++i)
    for (int j = 0; j < GH; ++j)
      x[i][j] = t.at(P + "wte.weight")[tokens[i] * GH + j] + t.at(P + "wpe.weight")[i * GH + j];
  auto ln = [&](const Mat& a, const std::string& name) {
    Mat r = a;
    const auto& w = t.at(name + ".weight");
    const auto& b = t.at(name + ".bias");
    for (auto& row : r) {
      double mean = std::accumulate(row.begin(), row.end(), 0.0) / GH, var = 0;
      for (double v : row) var += (v - mean) * (v - mean);
      var /= GH;
      for (int i = 0; i < GH; ++i) row[i] = (row[i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i];
    }
    return r;
  };
  const int hd = GH / GNH;
  for (int l = 0; l < GL; ++l) {
    const std::string p = P + "h." + std::to_string(l) + ".";
    Mat qkv = conv1d(ln(x, p + "ln_1"), t.at(p + "attn.c_attn.weight"), GH, 3 * GH, t.at(p + "attn.c_attn.bias"));
    Mat q(n), k(n), v(n);
    for (size_t r = 0; r < n; ++r) {
      q[r].assign(qkv[r].begin(), qkv[r].begin() + GH);
      k[r].assign(qkv[r].begin() + GH, qkv[r].begin() + 2 * GH);
      v[r].assign(qkv[r].begin() + 2 * GH, qkv[r].end());
    }
    Mat a = attention(q, k, v, GNH, GNH, hd);
    add(x, conv1d(a, t.at(p + "attn.c_proj.weight"), GH, GH, t.at(p + "attn.c_proj.bias")));
    Mat h = conv1d(ln(x, p + "ln_2"), t.at(p + "mlp.c_fc.weight"), GH, GI, t.at(p + "mlp.c_fc.bias"));
    for (auto& row : h)
      for (double& z : row) z = 0.5 * z * (1 + std::tanh(std::sqrt(2 / 3.141592653589793) * (z + 0.044715 * z * z * z)));
    add(x, conv1d(h, t.at(p + "mlp.c_proj.weight"), GI, GH, t.at(p + "mlp.c_proj.bias")));
  }
  Mat f = ln(x, P + "ln_f");
  Mat logits(n, std::vector<double>(GV));
  for (size_t r = 0; r < n; ++r)
    for (int o = 0; o < GV; ++o) {
      double s = 0;
      for (int i = 0; i < GH; ++i) s += f[r][i] * t.at(P + "wte.weight")[o * GH + i];
      logits[r][o] = s;
    }
  return flatten(logits);
}

// ---- helpers ----
template <typename A, typename B>
double rel_err(const A& a, const B& b) {
  double num = 0, den = 0;
  if (a.size() != b.size()) return 1e30;
  for (size_t i = 0; i < a.size(); ++i) {
    num = std::max(num, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    den = std::max(den, std::fabs(static_cast<double>(b[i])));
  }
  return den == 0 ? num : num / den;
}

std::vector<int32_t> blocks(int first, int count) {
  std::vector<int32_t> b(count);
  std::iota(b.begin(), b.end(), first);
  return b;
}

std::vector<float> run(Model& m, const SequenceChunk& c) {
  ForwardOutput out;
  m.forward({c}, out);
  return out.logits;
}

std::vector<int32_t> random_tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 r(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(r() % vocab);
  return t;
}

void self_consistency(Model& m, int vocab, const std::vector<double>& reference_logits,
                      const std::vector<int32_t>& tokens, const char* label) {
  const int tpb = 4, N = static_cast<int>(tokens.size());
  const int nb = (N + tpb - 1) / tpb;
  m.allocate_kv(64, tpb);

  // (d) one all-logits prefill against the plain-loop reference
  std::vector<float> full = run(m, {tokens, 0, blocks(0, nb), true});
  CHECK_MSG(full.size() == static_cast<size_t>(N) * vocab, "%s: %zu logits", label, full.size());
  double e = rel_err(full, reference_logits);
  CHECK_MSG(e < 1e-4, "%s: engine vs naive reference rel err %g", label, e);

  // only the last row unless all_logits
  std::vector<float> last = run(m, {tokens, 0, blocks(0, nb), false});
  CHECK(last.size() == static_cast<size_t>(vocab));
  e = rel_err(last, std::vector<float>(full.end() - vocab, full.end()));
  CHECK_MSG(e < 1e-5, "%s: last-row-only logits rel err %g", label, e);

  // (b) two chunks (past_len) and token by token give the same rows
  const int split = 5;
  std::vector<float> two = run(m, {std::vector<int32_t>(tokens.begin(), tokens.begin() + split), 0, blocks(8, nb), true});
  std::vector<float> rest =
      run(m, {std::vector<int32_t>(tokens.begin() + split, tokens.end()), split, blocks(8, nb), true});
  two.insert(two.end(), rest.begin(), rest.end());
  e = rel_err(two, full);
  CHECK_MSG(e < 1e-5, "%s: two-chunk prefill rel err %g", label, e);
  std::vector<float> steps;
  for (int i = 0; i < N; ++i) {
    std::vector<float> r = run(m, {{tokens[i]}, i, blocks(16, nb), false});
    steps.insert(steps.end(), r.begin(), r.end());
  }
  e = rel_err(steps, full);
  CHECK_MSG(e < 1e-5, "%s: token-by-token rel err %g", label, e);

  // (c) shuffled, non-contiguous blocks
  std::vector<int32_t> shuffled = {41, 3, 60, 27, 9, 33, 50, 1};
  shuffled.resize(nb);
  std::vector<float> sh = run(m, {tokens, 0, shuffled, true});
  e = rel_err(sh, full);
  CHECK_MSG(e < 1e-5, "%s: shuffled blocks rel err %g", label, e);

  // (a) a batch of 3 chunks (a prefill, a continuation, a decode) equals each alone
  std::vector<int32_t> ta = random_tokens(7, vocab, 7), tb = random_tokens(9, vocab, 8);
  run(m, {std::vector<int32_t>(tb.begin(), tb.begin() + 6), 0, {20, 21}, false});  // tb's past
  run(m, {std::vector<int32_t>(tokens.begin(), tokens.end() - 1), 0, {30, 31, 32}, false});  // decode's past
  std::vector<SequenceChunk> batch = {
      {ta, 0, {10, 11}, true},
      {std::vector<int32_t>(tb.begin() + 6, tb.end()), 6, {20, 21, 22}, false},
      {{tokens.back()}, N - 1, {30, 31, 32}, false},
  };
  ForwardOutput out;
  m.forward(batch, out);
  CHECK(out.first_row == std::vector<int32_t>({0, 7, 8}));
  CHECK(out.vocab_size == vocab);
  CHECK(out.logits.size() == static_cast<size_t>(9) * vocab);
  std::vector<float> alone_a = run(m, {ta, 0, {40, 41}, true});
  std::vector<float> alone_b = run(m, {tb, 0, {42, 43, 44}, false});
  std::vector<float> got_a(out.logits.begin(), out.logits.begin() + 7 * vocab);
  std::vector<float> got_b(out.logits.begin() + 7 * vocab, out.logits.begin() + 8 * vocab);
  std::vector<float> got_c(out.logits.begin() + 8 * vocab, out.logits.end());
  CHECK_MSG(rel_err(got_a, alone_a) < 1e-5, "%s: batch chunk a rel err %g", label, rel_err(got_a, alone_a));
  CHECK_MSG(rel_err(got_b, alone_b) < 1e-5, "%s: batch chunk b rel err %g", label, rel_err(got_b, alone_b));
  std::vector<float> want_c(full.end() - vocab, full.end());
  CHECK_MSG(rel_err(got_c, want_c) < 1e-5, "%s: batch chunk c rel err %g", label, rel_err(got_c, want_c));

  // bad block tables and tokens are errors, not crashes
  auto code_of = [&](const SequenceChunk& c) {
    try {
      ForwardOutput o;
      m.forward({c}, o);
    } catch (const EngineError& err) {
      return static_cast<int>(err.code());
    }
    return -1;
  };
  CHECK(code_of({tokens, 0, {0, 1}, false}) == static_cast<int>(ErrorCode::internal));            // too short
  CHECK(code_of({tokens, 0, {0, 1, 64}, false}) == static_cast<int>(ErrorCode::internal));        // out of range
  CHECK(code_of({tokens, 0, {0, -1, 2}, false}) == static_cast<int>(ErrorCode::internal));        // negative
  CHECK(code_of({{vocab}, 0, {0}, false}) == static_cast<int>(ErrorCode::invalid_argument));      // token id
  CHECK_THROWS(m.forward({{tokens, 0, {0, 1}, false}}, out), "needs 3 blocks but its block table has 2");
  CHECK_THROWS(m.forward({{tokens, 0, {0, 1, 99}, false}}, out), "is block 99, outside the pool of 64 blocks");
}

void llama_tests() {
  TinyCheckpoint ck = make_llama();
  uint64_t last_done = 0, last_total = 0;
  LoadOptions opts;
  opts.progress = [](void* user, uint64_t done, uint64_t total) {
    auto* p = static_cast<std::pair<uint64_t*, uint64_t*>*>(user);
    *p->first = done;
    *p->second = total;
  };
  std::pair<uint64_t*, uint64_t*> prog{&last_done, &last_total};
  opts.progress_user = &prog;
  auto m = load_model(ck.dir, opts);
  CHECK(last_total > 0 && last_done == last_total);
  CHECK(m->config().num_kv_heads == NKV);
  CHECK(m->kv_bytes_per_token() == static_cast<size_t>(L) * 2 * NKV * HD * 4);
  size_t params = 0;
  for (const auto& kv : ck.t) params += kv.second.size();
  CHECK(m->weight_bytes() == params * 4);
  std::vector<int32_t> tokens = random_tokens(11, V, 42);
  self_consistency(*m, V, naive_llama(ck.t, tokens), tokens, "llama");

  ShardInfo tp;
  tp.tp_size = 2;
  LoadOptions topts;
  topts.shard = tp;
  // A tp grid needs its tp group: the default (size-1) comm is refused by name.
  CHECK_THROWS(load_model(ck.dir, topts), "LoadOptions.tp_comm has 1 rank(s) but shard.tp_size is 2");

  // A wrong shape is reported with the tensor's name.
  TinyCheckpoint bad = make_llama();
  bad.shapes["model.layers.1.self_attn.k_proj.weight"] = {H, NKV * HD};
  bad.write(R"({"architectures":["LlamaForCausalLM"],"vocab_size":61,"hidden_size":32,"num_hidden_layers":2,)"
            R"("num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":48,"attention_bias":true})");
  CHECK_THROWS(load_model(bad.dir, LoadOptions{}),
               "tensor 'model.layers.1.self_attn.k_proj.weight' has shape [32, 16], expected [16, 32]");
  ::unlink((bad.dir + "/model.safetensors").c_str());
  CHECK_THROWS(load_model(bad.dir, LoadOptions{}), "neither model.safetensors");
}

void gpt2_tests() {
  TinyCheckpoint ck = make_gpt2();
  auto m = load_model(ck.dir, LoadOptions{});
  CHECK(m->config().architecture == Architecture::gpt2);
  std::vector<int32_t> tokens = random_tokens(11, GV, 43);
  self_consistency(*m, GV, naive_gpt2(ck.t, tokens), tokens, "gpt2");
  // Positions past n_positions have no embedding.
  m->allocate_kv(16, 4);
  ForwardOutput out;
  CHECK_THROWS(m->forward({{{1}, GP, blocks(0, 11), false}}, out), "position embeddings");
}

}  // namespace

TEST_MAIN({
  llama_tests();
  gpt2_tests();
})
