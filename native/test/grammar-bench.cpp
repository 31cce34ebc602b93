// Token-mask time per request step (a tool; bench/grammar-mask.ts builds the vocabulary and runs it). For every guide
// given: the time to compile it, then walks outputs through it choosing among the allowed tokens with a seeded
// generator, timing each step's mask — cold (positions met for the first time compute their context-independent
// masks) and warm (the same walks again) — against the same run's baseline, a mask made by walking every token of
// the vocabulary from the real stacks (no precomputation); each guide's every position computed at once (eager,
// what XGrammar's compile step does) on one thread; and as served: the guide compiled in a cache with its background
// thread (background-masks.h), the time from compile start until that thread has computed every position (a new
// guide's requests wait that long in the executor's queue), then the same walks' steps, which start only after it.
//   grammar-bench <vocab.bin> <steps> <walks> <kind>:<file> ...     kind: json_schema | regex | ebnf_grammar | json
// vocab.bin: int32 count, int32 offsets[count + 1], then the bytes (little-endian).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "errors.h"
#include "grammar/grammar-cache.h"
#include "grammar/grammar-matcher.h"
#include "grammar/token-walk.h"

using namespace engine;
using namespace engine::grammar;
using Clock = std::chrono::steady_clock;

namespace {

double micros(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::micro>(b - a).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t k = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return v[k];
}

std::vector<std::string> read_vocab(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  int32_t count = 0;
  in.read(reinterpret_cast<char*>(&count), 4);
  std::vector<int32_t> offsets(static_cast<size_t>(count) + 1);
  in.read(reinterpret_cast<char*>(offsets.data()), static_cast<std::streamsize>(offsets.size() * 4));
  std::string bytes(static_cast<size_t>(offsets.back()), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<std::string> out;
  for (int32_t i = 0; i < count; ++i) out.push_back(bytes.substr(static_cast<size_t>(offsets[i]), static_cast<size_t>(offsets[i + 1] - offsets[i])));
  return out;
}

// The baseline: every token of the vocabulary walked from the matcher's real state (what a matcher without
// precomputed masks does), through a matcher replaying the same tokens.
class NaiveMask {
 public:
  NaiveMask(const CompiledGrammar& g) : g_(g), stacks_(g.grammar(), pool_) {
    for (int32_t start : g.grammar().starts(g.grammar().root)) {
      StackSet s;
      stacks_.expand(start, kBottom, s);
      state_.nodes.insert(state_.nodes.end(), s.nodes.begin(), s.nodes.end());
      state_.accepting = state_.accepting || s.accepting;
    }
    std::sort(state_.nodes.begin(), state_.nodes.end());
    state_.nodes.erase(std::unique(state_.nodes.begin(), state_.nodes.end()), state_.nodes.end());
  }
  size_t fill(std::vector<uint64_t>& mask) {
    mask.assign(g_.vocab().mask_words(), 0);
    TokenWalk walk(stacks_, g_.vocab(), state_);
    size_t n = 0;
    for (size_t r = 0; r < g_.vocab().sorted().size(); ++r) {
      if (walk.step(static_cast<int32_t>(r)).alive) {
        const int32_t id = g_.vocab().sorted()[r];
        mask[static_cast<size_t>(id) >> 6] |= uint64_t{1} << (id & 63);
        ++n;
      }
    }
    return n;
  }
  void accept(int32_t id) {
    StackSet cur = state_, next;
    for (char c : g_.vocab().bytes(id)) {
      stacks_.advance(cur, static_cast<uint8_t>(c), next);
      std::swap(cur, next);
    }
    state_ = std::move(cur);
  }

 private:
  const CompiledGrammar& g_;
  StackPool pool_;
  Stacks stacks_;
  StackSet state_;
};

// The token a walk takes after a step's mask (chosen among the allowed ones with `rng`), or -1 where it ends: ending
// where allowed after a while, as a model would, so walks cover whole outputs.
int32_t choose(const std::vector<uint64_t>& mask, int32_t stop, int s, int steps, std::mt19937& rng) {
  std::vector<int32_t> allowed;
  for (int32_t id = 0; id <= stop; ++id)
    if ((mask[static_cast<size_t>(id) >> 6] >> (id & 63)) & 1u) allowed.push_back(id);
  if (allowed.empty()) return -1;
  const bool can_stop = std::find(allowed.begin(), allowed.end(), stop) != allowed.end();
  if (can_stop && (s > steps / 2 || rng() % 8 == 0)) return -1;
  int32_t pick = allowed[rng() % allowed.size()];
  if (pick == stop) pick = allowed[0] == stop && allowed.size() > 1 ? allowed[1] : allowed[0];
  return pick == stop ? -1 : pick;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: grammar-bench <vocab.bin> <steps> <walks> <kind>:<file> ...\n");
    return 2;
  }
  omp_set_num_threads(1);  // one core: the figures are per core
  const auto vocab_bytes = read_vocab(argv[1]);
  const int steps = std::stoi(argv[2]);
  const int walks = std::stoi(argv[3]);
  const int32_t stop = static_cast<int32_t>(vocab_bytes.size());  // one more id: the end token
  auto vocab = std::make_shared<const TokenVocab>(vocab_bytes, stop + 1);
  // GRAMMAR_BENCH_OWN_STORE=1: each guide compiled in a cache of its own, so no guide reuses another's masks
  // (mask-store.h): the cold and as-served figures of a guide met on a server that has seen no other.
  const bool own_store = std::getenv("GRAMMAR_BENCH_OWN_STORE") != nullptr;
  auto cache = std::make_unique<GrammarCache>(vocab, 1024, /*background=*/false);  // (cold: first use, as measured)
  // As served: the executor's cache, whose background thread computes a new guide's positions before its requests
  // start (its own store: the cold figures above are not helped by its walks, nor it by theirs).
  auto served = std::make_unique<GrammarCache>(vocab, 1024, /*background=*/true);
  std::vector<double> compile_ms, cold, warm, naive, advance, eager_ms, eager_positions, eager_walks, eager_mb;
  std::vector<double> ready_ms, served_steps;
  int guides = 0, failed = 0;
  for (int a = 4; a < argc; ++a) {
    const std::string arg = argv[a];
    const size_t colon = arg.find(':');
    GuidedDecodingParams p;
    const std::string kind = arg.substr(0, colon);
    p.guide_type = kind == "regex" ? GuideType::regex : kind == "ebnf_grammar" ? GuideType::ebnf_grammar
                 : kind == "json" ? GuideType::json : GuideType::json_schema;
    std::ifstream in(arg.substr(colon + 1));
    std::stringstream text;
    text << in.rdbuf();
    p.guide = text.str();
    std::shared_ptr<const CompiledGrammar> g;
    const auto t0 = Clock::now();
    try {
      if (own_store) cache = std::make_unique<GrammarCache>(vocab, 1024, false);
      g = cache->get(p);
    } catch (const EngineError& e) {
      std::fprintf(stderr, "%s: %s\n", arg.c_str(), e.what());
      ++failed;
      continue;
    }
    compile_ms.push_back(micros(t0, Clock::now()) / 1000);
    ++guides;
    {  // Every position's mask computed at once on one thread, as XGrammar's compile step does (a separate copy).
      CompiledGrammar eager(g->grammar(), vocab);
      std::vector<int32_t> all;
      for (size_t p = 0; p < eager.grammar().positions().size(); ++p)
        if (eager.grammar().positions()[p].kind == Position::bytes) all.push_back(static_cast<int32_t>(p));
      const auto te = Clock::now();
      eager.precompute(all);
      eager_ms.push_back(micros(te, Clock::now()) / 1000);
      eager_positions.push_back(static_cast<double>(all.size()));
      eager_walks.push_back(static_cast<double>(eager.vocabulary_walks()));
      eager_mb.push_back(static_cast<double>(eager.mask_bytes()) / (1 << 20));
    }
    std::vector<uint64_t> mask;
    const size_t served_before = served_steps.size();
    {  // As served: compile, every position computed by the cache's thread, then the walks' steps.
      if (own_store) served = std::make_unique<GrammarCache>(vocab, 1024, true);
      const auto ts = Clock::now();
      const auto sg = served->get(p);
      served->wait_for_background();
      ready_ms.push_back(micros(ts, Clock::now()) / 1000);
      for (int w = 0; w < walks; ++w) {
        GrammarMatcher m(sg, {stop});
        std::mt19937 rng(static_cast<uint32_t>(1000 * a + w));
        for (int s = 0; s < steps; ++s) {
          const auto t1 = Clock::now();
          m.fill_mask(mask);
          served_steps.push_back(micros(t1, Clock::now()));
          const int32_t pick = choose(mask, stop, s, steps, rng);
          if (pick < 0) break;
          m.fits_budget(pick, 64);
          m.accept_token(pick);
        }
      }
    }
    const size_t warm_before = warm.size();
    for (int pass = 0; pass < 2; ++pass) {
      for (int w = 0; w < walks; ++w) {
        GrammarMatcher m(g, {stop});
        NaiveMask baseline(*g);
        std::mt19937 rng(static_cast<uint32_t>(1000 * a + w));
        for (int s = 0; s < steps; ++s) {
          const auto t1 = Clock::now();
          m.fill_mask(mask);
          const double us = micros(t1, Clock::now());
          (pass == 0 ? cold : warm).push_back(us);
          if (pass == 1 && w == 0 && s % 4 == 0) {  // the baseline is slow: every fourth step of one walk
            std::vector<uint64_t> other;
            const auto t2 = Clock::now();
            baseline.fill(other);
            naive.push_back(micros(t2, Clock::now()));
          }
          const int32_t pick = choose(mask, stop, s, steps, rng);
          if (pick < 0) break;
          const auto t3 = Clock::now();
          m.fits_budget(pick, 64);  // as the executor checks each drawn token against the tokens left
          m.accept_token(pick);
          if (pass == 1) advance.push_back(micros(t3, Clock::now()));
          baseline.accept(pick);
        }
      }
    }
    if (std::getenv("GRAMMAR_BENCH_EACH") != nullptr) {
      const std::vector<double> mine(warm.begin() + static_cast<long>(warm_before), warm.end());
      const std::vector<double> as_served(served_steps.begin() + static_cast<long>(served_before), served_steps.end());
      std::printf("  %s: warm p50 %.1f us, max %.1f us; as served: ready after %.1f ms, max %.1f us\n", arg.c_str(),
                  percentile(mine, 0.5), percentile(mine, 1.0), ready_ms.back(), percentile(as_served, 1.0));
    }
  }
  std::printf("vocabulary %d tokens, %d guides compiled (%d refused), %d walks x up to %d steps each\n",
              stop, guides, failed, walks, steps);
  std::printf("compile ms: p50 %.2f, max %.2f\n", percentile(compile_ms, 0.5), percentile(compile_ms, 1.0));
  std::printf("every position's mask at once (eager, one thread) ms: p50 %.1f, max %.1f; positions p50 %.0f, max %.0f "
              "(vocabulary walks p50 %.0f, max %.0f: equal positions share one); masks MiB p50 %.1f, max %.1f\n",
              percentile(eager_ms, 0.5), percentile(eager_ms, 1.0), percentile(eager_positions, 0.5),
              percentile(eager_positions, 1.0), percentile(eager_walks, 0.5), percentile(eager_walks, 1.0),
              percentile(eager_mb, 0.5), percentile(eager_mb, 1.0));
  std::printf("mask us, cold (first use of positions): p50 %.1f, p99 %.1f, max %.1f (%zu steps)\n", percentile(cold, 0.5),
              percentile(cold, 0.99), percentile(cold, 1.0), cold.size());
  std::printf("mask us, warm: p50 %.1f, p99 %.1f, max %.1f (%zu steps)\n", percentile(warm, 0.5), percentile(warm, 0.99),
              percentile(warm, 1.0), warm.size());
  std::printf("as served: compile + every position computed by the background thread (a new guide's requests wait "
              "for it) ms: p50 %.1f, max %.1f\n",
              percentile(ready_ms, 0.5), percentile(ready_ms, 1.0));
  std::printf("mask us, as served (steps start once every position is computed): p50 %.1f, p99 %.1f, max %.1f "
              "(%zu steps)\n",
              percentile(served_steps, 0.5), percentile(served_steps, 0.99), percentile(served_steps, 1.0),
              served_steps.size());
  std::printf("budget check + accept us, warm: p50 %.1f, p99 %.1f, max %.1f\n", percentile(advance, 0.5),
              percentile(advance, 0.99), percentile(advance, 1.0));
  std::printf("baseline (every token walked from the stacks) us: p50 %.1f, p99 %.1f (%zu steps); warm p50 ratio %.1fx\n",
              percentile(naive, 0.5), percentile(naive, 0.99), naive.size(),
              percentile(naive, 0.5) / std::max(1e-9, percentile(warm, 0.5)));
  return failed == 0 ? 0 : 1;
}
