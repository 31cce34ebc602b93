// GrammarCache's background thread (background-masks.h): once it is idle every position of a new guide has its
// mask, equal to the mask the position computes itself without sharing; steps that race it still get exact masks;
// a guide evicted before the thread reaches it is dropped; a cache destroyed with guides queued stops at once;
// without the thread positions are computed on first use only. A guide is pending (its requests wait) from its
// compile until the thread is done with it, unless it is over the waited-work bound; the thread tells of each guide
// it settles; a held thread keeps guides pending, and destroying the cache settles them. Ordering by
// wait_for_background and the hold hook, never by the clock.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "check.h"
#include "grammar/gbnf-parser.h"
#include "grammar/grammar-cache.h"
#include "grammar/grammar-matcher.h"
#include "grammar-test-util.h"

using namespace engine;
using namespace engine::grammar;

namespace {

std::shared_ptr<const TokenVocab> make_vocab(int32_t& stop) {
  return test::byte_vocab({"\"", "\",", "\"}", "\": \"", "{\"", "\", \"", "true", "false", "null", "ab", "abc", "12", "123",
                           "name", "\"name\": \"", "\", \"tags\": [", "\"]", "]}", "x\"", "0.5"},
                          stop);
}

GuidedDecodingParams schema(int salt) {
  GuidedDecodingParams p;
  p.guide_type = GuideType::json_schema;
  p.guide = R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": )" + std::to_string(8 + salt) +
            R"(}, "tags": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 5}},
             "n": {"type": "integer"}}, "required": ["name", "tags"], "additionalProperties": false})";
  return p;
}

std::vector<int32_t> byte_positions(const CompiledGrammar& g) {
  std::vector<int32_t> all;
  for (size_t p = 0; p < g.grammar().positions().size(); ++p)
    if (g.grammar().positions()[p].kind == Position::bytes) all.push_back(static_cast<int32_t>(p));
  return all;
}

void every_position_ahead(const std::shared_ptr<const TokenVocab>& vocab) {
  GrammarCache cache(vocab, 16);
  const auto g = cache.get(schema(0));
  cache.wait_for_background();
  const auto all = byte_positions(*g);
  CHECK(!all.empty());
  int missing = 0, differ = 0;
  // The reference: the same guide, every position walking the vocabulary itself.
  CompiledGrammar own(g->grammar(), vocab, CompiledGrammarOptions{false, nullptr});
  for (int32_t p : all) {
    if (!g->has_mask(p)) {
      ++missing;
      continue;
    }
    const PositionMask& a = g->position_mask(p);
    const PositionMask& b = own.position_mask(p);
    differ += test::accepted_bits(a, *vocab) != test::accepted_bits(b, *vocab) || a.uncertain != b.uncertain;
  }
  std::printf("background: %zu positions, %d without a mask once idle, %d differ from their own walks\n", all.size(),
              missing, differ);
  CHECK(missing == 0);
  CHECK(differ == 0);
}

// Steps taken while the thread works on the same guide (whichever computes a position first, the mask is exact).
void steps_race_the_thread(const std::shared_ptr<const TokenVocab>& vocab, int32_t stop) {
  GrammarCache cache(vocab, 16), off(vocab, 16, /*background=*/false);
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    const auto g = cache.get(schema(static_cast<int>(seed)));
    const auto r = off.get(schema(static_cast<int>(seed)));
    GrammarMatcher m(g, {stop}), ref(r, {stop});
    const auto [steps, mismatches] = test::walk_side_by_side(m, ref, stop, seed, 80, /*may_stop=*/false);
    CHECK_MSG(mismatches == 0, "seed %u: %d of %d steps' masks differ beside the background thread", seed, mismatches,
              steps);
  }
  cache.wait_for_background();
}

void evicted_and_destroyed(const std::shared_ptr<const TokenVocab>& vocab) {
  {
    GrammarCache cache(vocab, 1);  // the second guide evicts the first; nothing else holds it
    std::weak_ptr<const CompiledGrammar> first = cache.get(schema(1));
    const auto second = cache.get(schema(2));
    cache.wait_for_background();  // returns: the first guide was done or dropped
    CHECK(cache.size() == 1);
    int missing = 0;
    for (int32_t p : byte_positions(*second)) missing += second->has_mask(p) ? 0 : 1;
    CHECK(missing == 0);
  }
  {
    GrammarCache cache(vocab, 64);
    for (int i = 0; i < 20; ++i) cache.get(schema(i));
  }  // destroyed with guides queued: stops at the next slice (a hang would fail the run's time limit)
  CHECK(true);
}

void without_the_thread(const std::shared_ptr<const TokenVocab>& vocab) {
  ::setenv("TRTLLM_GRAMMAR_BACKGROUND_MASKS", "0", 1);
  GrammarCache cache(vocab, 16);
  ::unsetenv("TRTLLM_GRAMMAR_BACKGROUND_MASKS");
  const auto g = cache.get(schema(3));
  cache.wait_for_background();  // (no thread: at once)
  int computed = 0;
  for (int32_t p : byte_positions(*g)) computed += g->has_mask(p) ? 1 : 0;
  CHECK_MSG(computed == 0, "%d positions computed with the background thread off", computed);
}

// positions * tokens of a guide (BackgroundMasks's measure of the work of computing every position).
int64_t work_of(const CompiledGrammar& g) {
  return static_cast<int64_t>(byte_positions(g).size()) * static_cast<int64_t>(g.vocab().sorted().size());
}

void pending_until_done(const std::shared_ptr<const TokenVocab>& vocab) {
  std::atomic<int> settled{0};
  int64_t work = 0;
  {
    GrammarCache probe(vocab, 16, /*background=*/false);
    work = work_of(*probe.get(schema(4)));
  }
  // The bound between the two guides: schema(4) is waited for, the larger schema(40) is not.
  GrammarCache cache(vocab, 16, /*background=*/true, work);
  cache.set_on_masks_ready([&] { ++settled; });
  cache.hold_background(true);
  const auto waited = cache.get(schema(4));
  const auto large = cache.get(schema(40));
  CHECK_MSG(work_of(*large) > work, "schema(40): %lld, bound %lld", static_cast<long long>(work_of(*large)),
            static_cast<long long>(work));
  CHECK(waited->masks_pending());
  CHECK(!large->masks_pending());
  CHECK(cache.get(schema(4))->masks_pending());  // (the cached guide, still pending)
  cache.hold_background(false);
  cache.wait_for_background();
  CHECK(!waited->masks_pending() && !large->masks_pending());
  CHECK_MSG(settled.load() == 1, "told of %d settled guides, 1 was pending", settled.load());
  int missing = 0;
  for (int32_t p : byte_positions(*waited)) missing += waited->has_mask(p) ? 0 : 1;
  CHECK(missing == 0);
}

void destroyed_while_held(const std::shared_ptr<const TokenVocab>& vocab) {
  std::vector<std::shared_ptr<const CompiledGrammar>> kept;
  {
    GrammarCache cache(vocab, 16);
    cache.hold_background(true);
    for (int i = 0; i < 3; ++i) kept.push_back(cache.get(schema(50 + i)));
    for (const auto& g : kept) CHECK(g->masks_pending());
  }  // stops though held; the guides it never finished are no longer pending (their requests run lazily)
  for (const auto& g : kept) CHECK(!g->masks_pending());
}

void never_pending_without_the_thread(const std::shared_ptr<const TokenVocab>& vocab) {
  GrammarCache off(vocab, 16, /*background=*/false);
  CHECK(!off.get(schema(5))->masks_pending());
}

}  // namespace

TEST_MAIN({
  int32_t stop = 0;
  const auto vocab = make_vocab(stop);
  every_position_ahead(vocab);
  steps_race_the_thread(vocab, stop);
  evicted_and_destroyed(vocab);
  without_the_thread(vocab);
  pending_until_done(vocab);
  destroyed_while_held(vocab);
  never_pending_without_the_thread(vocab);
})
