// Guided decoding through the executor over the FakeModel (whose greedy choice ignores any grammar): outputs follow
// the guide, end where it is complete, mix with free requests in one batch without changing them, stream the same
// tokens, and bad guides or combinations are refused at enqueue naming what is wrong.
#include <algorithm>
#include <map>
#include <regex>
#include <string>

#include "check.h"
#include "device-sampling-fake-model.h"
#include "guided-test-util.h"

using namespace engine;
using namespace test;

namespace {

constexpr int32_t kVocab = kGuidedVocab;

ExecutorConfig config(bool with_vocab = true) {
  ExecutorConfig c = small_config();
  c.max_beam_width = 2;
  if (with_vocab) c.guided_decoding = guided_config();
  return c;
}

std::string text_of(const std::vector<int32_t>& ids) { return guided_text(ids); }

Request guided(std::vector<int32_t> prompt, int32_t max_tokens, GuideType type, std::string guide, bool streaming = false) {
  return guided_request(std::move(prompt), max_tokens, type, std::move(guide), streaming);
}

}  // namespace

TEST_MAIN({
  // A device model names the threads for the executor's host work beside it (guided masks, host-sampled rows): the
  // loop thread takes them, whatever OMP_NUM_THREADS says (the launcher sets 1 for every rank).
  for (int32_t threads : {3, 1}) {
    auto m = std::make_unique<FakeModel>(kVocab);
    m->host_threads_value = threads;
    Harness h(std::move(m), config());
    const RequestId id = h.executor->enqueue(guided(prompt_of(5, 1), 8, GuideType::ebnf_grammar, R"(root ::= "a" [0-9]+)"));
    auto out = h.collect({id});
    CHECK(!out[id].has_error);
    CHECK_MSG(h.model->omp_threads_seen == threads, "loop thread ran %d OpenMP threads, the model named %d",
              h.model->omp_threads_seen.load(), threads);
  }
  // A closed grammar: the output matches it exactly and ends as soon as nothing can follow (no end token needed).
  {
    Harness h(config());
    const RequestId a = h.executor->enqueue(guided(prompt_of(5, 1), 30, GuideType::ebnf_grammar, R"(root ::= "a" [0-9]{2,4} "z")"));
    const RequestId b = h.executor->enqueue(guided(prompt_of(7, 2), 30, GuideType::ebnf_grammar,
                                                   R"(root ::= "[" item (", " item)* "]"  item ::= "true" | "false" | [0-9]+)"));
    // A free request in the same batch keeps exactly its unconstrained output.
    Request free = make_request(prompt_of(6, 3), 12);
    free.output.exclude_input_from_output = true;
    const auto reference = reference_greedy(*h.model, prompt_of(6, 3), 12);
    const RequestId c = h.executor->enqueue(free);
    auto out = h.collect({a, b, c});
    const std::string ta = text_of(out[a].tokens);
    CHECK_MSG(std::regex_match(ta, std::regex("a[0-9]{2,4}z")), "got '%s'", ta.c_str());
    CHECK(out[a].reason == FinishReason::end_id && !out[a].has_error);
    const std::string tb = text_of(out[b].tokens);
    CHECK_MSG(std::regex_match(tb, std::regex(R"(\[(true|false|[0-9]+)(, (true|false|[0-9]+))*\]?)")), "got '%s'", tb.c_str());
    CHECK(out[b].reason == FinishReason::end_id || out[b].reason == FinishReason::length);
    CHECK(out[c].tokens == reference);
    CHECK(all_blocks_free(*h.executor));
  }
  // Streaming gives the same tokens as the whole response; an open grammar ends with the end token, which only
  // comes where the output is complete.
  {
    Harness h(config());
    const std::string g = R"(root ::= [a-c]+ "." | "x" [0-9]*)";
    const RequestId s = h.executor->enqueue(guided(prompt_of(5, 4), 16, GuideType::ebnf_grammar, g, /*streaming=*/true));
    const RequestId w = h.executor->enqueue(guided(prompt_of(5, 4), 16, GuideType::ebnf_grammar, g));
    auto out = h.collect({s, w});
    CHECK(out[s].tokens == out[w].tokens && !out[s].tokens.empty());
    const std::string t = text_of(out[w].tokens);
    CHECK_MSG(std::regex_match(t, std::regex(R"([a-c]+\.|x[0-9]*)")) || out[w].reason == FinishReason::length, "got '%s'", t.c_str());
    CHECK(all_blocks_free(*h.executor));
  }
  // Sampled (not greedy) requests follow the grammar too, whatever the draw.
  {
    Harness h(config());
    std::set<RequestId> ids;
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      Request r = guided(prompt_of(4, static_cast<int32_t>(seed)), 20, GuideType::ebnf_grammar, R"(root ::= ("ab" | "az" | [0-9])+ "z")");
      r.sampling.temperature = 1.0f;
      r.sampling.top_k = 0;
      r.sampling.top_p = 1.0f;
      r.sampling.seed = seed;
      ids.insert(h.executor->enqueue(r));
    }
    auto out = h.collect(ids);
    for (RequestId id : ids) {
      const std::string t = text_of(out[id].tokens);
      const bool complete = std::regex_match(t, std::regex(R"((ab|az|[0-9])+z)"));
      const bool prefix = out[id].reason == FinishReason::length && std::regex_match(t, std::regex(R"((ab|az|[0-9])*(a)?)"));
      CHECK_MSG(!out[id].has_error && (complete || prefix), "seed output '%s'", t.c_str());
    }
  }
  // Outputs are complete by max_tokens whatever the model prefers: near the budget only tokens after which the
  // guide can still be finished in time are allowed (the fake model would otherwise run on inside the loops). The
  // guarantee counts bytes (any text can be spelled a byte a token): max_tokens covers the shortest text in bytes.
  {
    Harness h(config());
    std::set<RequestId> ids;
    std::map<RequestId, std::pair<std::string, int32_t>> asked;
    const std::vector<std::string> guides = {R"(root ::= "a" [b-z]* ".")", R"(root ::= "[" ([a-z0-9]+ (", " [a-z0-9]+)*)? "]")",
                                             R"(root ::= "{\"k\": " ("\"" [a-z]* "\"" | [0-9]+ ("." [0-9]+)?) "}")"};
    for (size_t k = 0; k < guides.size(); ++k)
      for (int32_t max_tokens : {9, 12, 17, 33}) {  // 9: the third guide's shortest text in bytes (8), and its end token
        const RequestId id = h.executor->enqueue(guided(prompt_of(4, static_cast<int32_t>(k) + max_tokens), max_tokens, GuideType::ebnf_grammar, guides[k]));
        ids.insert(id);
        asked[id] = {guides[k], max_tokens};
      }
    auto out = h.collect(ids);
    const std::vector<std::regex> complete = {std::regex(R"(a[b-z]*\.)"), std::regex(R"(\[([a-z0-9]+(, [a-z0-9]+)*)?\])"),
                                              std::regex(R"(\{"k": ("[a-z]*"|[0-9]+(\.[0-9]+)?)\})")};
    for (RequestId id : ids) {
      const size_t k = static_cast<size_t>(std::find(guides.begin(), guides.end(), asked[id].first) - guides.begin());
      const std::string t = text_of(out[id].tokens);
      CHECK_MSG(std::regex_match(t, complete[k]) && static_cast<int32_t>(out[id].tokens.size()) <= asked[id].second,
                "guide %zu, max_tokens %d: '%s'", k, asked[id].second, t.c_str());
    }
    CHECK(all_blocks_free(*h.executor));
  }
  // A model that samples on its device gets each guided row's mask with the chunk (filled for the batch before the
  // forward) and draws under it; a drawn token that leaves the guide unfinishable in the tokens left is drawn again
  // on the host after its step is recomputed. Every output equals the host-sampling executor's, greedy and sampled.
  {
    const std::vector<std::string> guides = {R"(root ::= "a" [b-z]* ".")", R"(root ::= "[" ([a-z0-9]+ (", " [a-z0-9]+)*)? "]")",
                                             R"(root ::= "{\"k\": " ("\"" [a-z]* "\"" | [0-9]+ ("." [0-9]+)?) "}")",
                                             R"(root ::= "a" [0-9]{2,4} "z")"};
    auto run = [&](Harness& h) {
      std::vector<RequestId> ids;
      for (size_t k = 0; k < guides.size(); ++k)
        for (int32_t max_tokens : {9, 12, 17, 33})
          for (uint64_t seed : {0, 3}) {  // 0: greedy; 3: sampled at temperature 1
            Request r = guided(prompt_of(4, static_cast<int32_t>(k) + max_tokens), max_tokens, GuideType::ebnf_grammar,
                               guides[k], /*streaming=*/seed == 3);
            if (seed != 0) {
              r.sampling.top_p = 1.0f;
              r.sampling.seed = seed;
            }
            ids.push_back(h.executor->enqueue(r));
          }
      Request free = make_request(prompt_of(6, 3), 12);
      free.output.exclude_input_from_output = true;
      ids.push_back(h.executor->enqueue(free));
      auto out = h.collect(std::set<RequestId>(ids.begin(), ids.end()));
      std::vector<std::vector<int32_t>> tokens;
      for (RequestId id : ids) {
        CHECK_MSG(!out[id].has_error, "%s", out[id].error_message.c_str());
        tokens.push_back(out[id].tokens);
      }
      CHECK(all_blocks_free(*h.executor));
      return tokens;
    };
    Harness host(config());
    const auto expected = run(host);
    const std::vector<std::regex> complete = {std::regex(R"(a[b-z]*\.)"), std::regex(R"(\[([a-z0-9]+(, [a-z0-9]+)*)?\])"),
                                              std::regex(R"(\{"k": ("[a-z]*"|[0-9]+(\.[0-9]+)?)\})"), std::regex("a[0-9]{2,4}z")};
    // The redraw from the row the device drew from (the CUDA decoder), and by recomputing the step (a model that
    // cannot give the row back).
    for (bool gives_rows : {true, false}) {
      auto device_model = std::make_unique<DeviceSamplingFakeModel>(kVocab, 512);
      DeviceSamplingFakeModel* dm = device_model.get();
      dm->gives_rows = gives_rows;
      Harness device(std::move(device_model), config());
      const auto got = run(device);
      CHECK_MSG(got == expected, "gives_rows %d", gives_rows);
      CHECK_MSG(dm->masked_rows.load() > 100, "masked device rows: %d", dm->masked_rows.load());
      // Host rows of a batch of guided and greedy requests come only from recomputed budget redraws.
      if (gives_rows) {
        CHECK_MSG(dm->rows_given.load() > 0 && dm->host_rows.load() == 0, "rows given %d, host rows %d", dm->rows_given.load(), dm->host_rows.load());
      } else {
        CHECK_MSG(dm->host_rows.load() > 0, "host rows: %d", dm->host_rows.load());
      }
      for (size_t i = 0; i + 1 < got.size(); ++i) {
        const std::string t = text_of(got[i]);
        CHECK_MSG(std::regex_match(t, complete[i / 8]), "guide %zu: '%s'", i / 8, t.c_str());
      }
    }
  }
  // Refused at enqueue, naming the problem.
  {
    Harness none(config(/*with_vocab=*/false));
    CHECK_THROWS(none.executor->enqueue(guided(prompt_of(3, 1), 4, GuideType::ebnf_grammar, "root ::= \"a\"")),
                 "guidedDecoding needs the executor's guided-decoding vocabulary");
    Harness h(config());
    Request beams = guided(prompt_of(3, 1), 4, GuideType::ebnf_grammar, "root ::= \"a\"");
    beams.sampling.beam_width = 2;
    CHECK_THROWS(h.executor->enqueue(beams), "cannot be combined with beam search (beamWidth 2)");
    CHECK_THROWS(h.executor->enqueue(guided(prompt_of(3, 1), 4, GuideType::ebnf_grammar, "")), "guidedDecoding.guide is empty");
    CHECK_THROWS(h.executor->enqueue(guided(prompt_of(3, 1), 4, GuideType::ebnf_grammar, "root ::= (\"a\"")),
                 "ebnf_grammar: expected ')' to close the group opened at line 1, column 10");
    CHECK_THROWS(h.executor->enqueue(guided(prompt_of(3, 1), 4, GuideType::ebnf_grammar, "root ::= x")),
                 "ebnf_grammar: rule 'x' is used but never defined");
    // After the refusals the executor serves normally and holds no blocks.
    const RequestId ok = h.executor->enqueue(guided(prompt_of(3, 1), 8, GuideType::ebnf_grammar, "root ::= \"ab\" \"12\"?"));
    auto out = h.collect({ok});
    CHECK(text_of(out[ok].tokens) == "ab" || text_of(out[ok].tokens) == "ab12");
    CHECK(all_blocks_free(*h.executor));
  }
  // A guide the vocabulary cannot spell ends the request with an error naming why, and frees its blocks — with
  // host sampling and with the mask filled during a device-sampling pass; the batch's other requests go on.
  for (bool device_sampling : {false, true}) {
    auto h = device_sampling ? Harness(std::make_unique<DeviceSamplingFakeModel>(kVocab, 512), config()) : Harness(config());
    const RequestId r = h.executor->enqueue(guided(prompt_of(3, 1), 8, GuideType::ebnf_grammar, "root ::= \"a\" \"\\u00e8\""));
    const RequestId ok = h.executor->enqueue(guided(prompt_of(3, 2), 8, GuideType::ebnf_grammar, "root ::= \"ab\" [0-9]"));
    auto out = h.collect({r, ok});
    CHECK_MSG(out[r].has_error && out[r].error_message.find("no token of the vocabulary can continue") != std::string::npos,
              "device %d: %s", device_sampling, out[r].error_message.c_str());
    CHECK(!out[ok].has_error && std::regex_match(text_of(out[ok].tokens), std::regex("ab[0-9]")));
    CHECK(all_blocks_free(*h.executor));
  }
})
