#include "scheduling/validate.h"

#include <cmath>
#include <sstream>
#include <string>

#include "errors.h"
#include "kv-cache/kv-window.h"
#include "model/model-config.h"

namespace engine {
namespace {

[[noreturn]] void fail(const std::string& message) { throw EngineError(ErrorCode::invalid_argument, message); }

std::string num(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::ostringstream s;
  s << v;
  return s.str();
}

void check_token(const std::string& field, int32_t token, int32_t vocab) {
  if (token < 0 || token >= vocab) {
    fail(field + " = " + std::to_string(token) + " is out of range [0, " + std::to_string(vocab) + ") (vocab_size)");
  }
}

void check_optional_id(const char* field, int32_t id, int32_t vocab) {
  if (id == -1) return;  // -1: not set
  if (id < 0 || id >= vocab) {
    fail(std::string(field) + " = " + std::to_string(id) + " is out of range [0, " + std::to_string(vocab) +
         ") (vocab_size); use -1 for none");
  }
}

void check_word_lists(const char* field, const std::vector<TokenIds>& lists, int32_t vocab) {
  for (size_t i = 0; i < lists.size(); ++i) {
    if (lists[i].empty()) fail(std::string(field) + "[" + std::to_string(i) + "] is empty");
    for (size_t j = 0; j < lists[i].size(); ++j)
      check_token(std::string(field) + "[" + std::to_string(i) + "][" + std::to_string(j) + "]", lists[i][j], vocab);
  }
}

// P-tuning: the table fits the model ([prompt_vocab_size, hidden_size], finite) and every prompt id is a real token
// or one of the table's virtual ones. Checked here, never in the forward pass, so a bad table fails only its request.
void check_prompt_table(const Request& r, const ValidationLimits& lim) {
  const PromptTable* t = r.prompt_table.get();
  if (t == nullptr) {
    for (size_t i = 0; i < r.input_token_ids.size(); ++i)
      check_token("input_token_ids[" + std::to_string(i) + "]", r.input_token_ids[i], lim.vocab_size);
    return;
  }
  if (!lim.prompt_tables) fail("prompt_embedding_table: " + lim.prompt_table_refusal);
  if (t->rows < 1) fail("prompt_embedding_table has " + std::to_string(t->rows) + " rows (prompt_vocab_size); it needs >= 1");
  if (t->hidden != lim.hidden_size)
    fail("prompt_embedding_table rows have width " + std::to_string(t->hidden) + " but must have the model's hidden_size " +
         std::to_string(lim.hidden_size));
  if (t->data.size() != static_cast<size_t>(t->rows) * static_cast<size_t>(t->hidden))
    fail("prompt_embedding_table holds " + std::to_string(t->data.size()) + " values, not prompt_vocab_size " +
         std::to_string(t->rows) + " x hidden_size " + std::to_string(t->hidden));
  for (size_t i = 0; i < t->data.size(); ++i)
    if (!std::isfinite(t->data[i]))
      fail("prompt_embedding_table[" + std::to_string(i / static_cast<size_t>(t->hidden)) + "][" +
           std::to_string(i % static_cast<size_t>(t->hidden)) + "] must be finite, got " + num(t->data[i]));
  const int64_t end = static_cast<int64_t>(lim.vocab_size) + t->rows;
  for (size_t i = 0; i < r.input_token_ids.size(); ++i) {
    const int32_t id = r.input_token_ids[i];
    if (id < 0 || id >= end)
      fail("input_token_ids[" + std::to_string(i) + "] = " + std::to_string(id) + " is out of range [0, " +
           std::to_string(end) + ") (vocab_size " + std::to_string(lim.vocab_size) + " + prompt_vocab_size " +
           std::to_string(t->rows) + ")");
  }
}

}  // namespace

void validate_request(const Request& r, const ValidationLimits& lim) {
  const int64_t prompt = static_cast<int64_t>(r.input_token_ids.size());
  if (prompt == 0) fail("input_token_ids is empty");
  check_prompt_table(r, lim);
  if (r.max_tokens <= 0) fail("max_tokens must be > 0, got " + std::to_string(r.max_tokens));

  const int64_t total = prompt + r.max_tokens;
  if (total > lim.max_seq_len) {
    fail("prompt length " + std::to_string(prompt) + " + max_tokens " + std::to_string(r.max_tokens) + " = " +
         std::to_string(total) + " exceeds max_seq_len " + std::to_string(lim.max_seq_len));
  }
  if (!lim.enable_chunked_context && prompt > lim.max_num_tokens) {
    fail("prompt length " + std::to_string(prompt) + " exceeds max_num_tokens " + std::to_string(lim.max_num_tokens) +
         " (enable chunked context to serve longer prompts)");
  }
  // A request the whole pool cannot hold would wait forever; reject it now instead. Beams share the prompt's full
  // blocks and each needs its own for the rest (scheduler.h, SchedulerEntry::beam_width).
  if (r.num_draft_tokens < -1 || r.num_draft_tokens > kMaxDraftTokens)
    fail("num_draft_tokens must be in [0, " + std::to_string(kMaxDraftTokens) + "] (or -1: the server's), got " +
         std::to_string(r.num_draft_tokens));
  if (r.max_attention_window < 0)
    fail("max_attention_window_size must be >= 1 (or 0: the server's), got " + std::to_string(r.max_attention_window));
  const int64_t tpb = lim.kv_tokens_per_block > 0 ? lim.kv_tokens_per_block : 1;
  const int64_t beams = r.sampling.beam_width > 1 ? r.sampling.beam_width : 1;
  const int64_t shared = beams > 1 ? prompt / tpb : 0;
  int64_t blocks = shared + beams * ((total + tpb - 1) / tpb - shared);
  if (beams == 1) {
    // Windowed on every layer: at most its window's blocks at once, its chunks being no longer than its prompt
    // (the scheduler cuts a paused one's recompute to that length too).
    const int32_t cap = sequence_window_cap(lim.max_attention_window, r.max_attention_window);
    const int32_t window = kv_release_window(lim.layer_window, lim.num_layers, cap);
    blocks = kv_lifetime_blocks(total, prompt, window, static_cast<int32_t>(tpb));
  }
  if (blocks > lim.kv_num_blocks) {
    fail("prompt length " + std::to_string(prompt) + " + max_tokens " + std::to_string(r.max_tokens) + " = " +
         std::to_string(total) + " tokens" + (beams > 1 ? " x beam_width " + std::to_string(beams) : std::string()) +
         " need " + std::to_string(blocks) + " KV blocks but the KV cache has only " +
         std::to_string(lim.kv_num_blocks) + " blocks of " + std::to_string(tpb) +
         " tokens (max_tokens_in_paged_kv_cache " + std::to_string(static_cast<int64_t>(lim.kv_num_blocks) * tpb) +
         ")");
  }

  const SamplingConfig& s = r.sampling;
  if (s.beam_width < 1 || s.beam_width > lim.max_beam_width) {
    fail("beam_width must be 1..max_beam_width (" + std::to_string(lim.max_beam_width) + "), got " +
         std::to_string(s.beam_width));
  }
  if (!std::isfinite(s.temperature) || s.temperature < 0) {
    fail("temperature must be a finite number >= 0, got " + num(s.temperature));
  }
  if (s.top_p && !(*s.top_p > 0 && *s.top_p <= 1)) fail("top_p must be in (0, 1], got " + num(*s.top_p));
  if (s.top_k < 0) fail("top_k must be >= 0, got " + std::to_string(s.top_k));
  if (!std::isfinite(s.repetition_penalty) || s.repetition_penalty <= 0) {
    fail("repetition_penalty must be a finite number > 0, got " + num(s.repetition_penalty));
  }
  if (!std::isfinite(s.presence_penalty)) fail("presence_penalty must be finite, got " + num(s.presence_penalty));
  if (!std::isfinite(s.frequency_penalty)) fail("frequency_penalty must be finite, got " + num(s.frequency_penalty));
  if (s.min_tokens < 0 || s.min_tokens > r.max_tokens) {
    fail("min_tokens must be in [0, max_tokens " + std::to_string(r.max_tokens) + "], got " + std::to_string(s.min_tokens));
  }
  if (!std::isfinite(s.length_penalty)) fail("length_penalty must be finite, got " + num(s.length_penalty));
  if (s.early_stopping < -1 || s.early_stopping > 1) {
    fail("early_stopping must be -1 (never), 0 (heuristic) or 1 (at beam_width hypotheses), got " +
         std::to_string(s.early_stopping));
  }
  if (!std::isfinite(s.beam_search_diversity_rate) || s.beam_search_diversity_rate < 0) {
    fail("beam_search_diversity_rate must be a finite number >= 0, got " + num(s.beam_search_diversity_rate));
  }
  if (r.num_return_sequences < 0 || r.num_return_sequences > s.beam_width) {
    fail("num_return_sequences must be in [0, beam_width " + std::to_string(s.beam_width) + "] (0: beam_width), got " +
         std::to_string(r.num_return_sequences));
  }
  if (!r.embedding_bias.empty()) {
    if (static_cast<int64_t>(r.embedding_bias.size()) != lim.vocab_size) {
      fail("embedding_bias has " + std::to_string(r.embedding_bias.size()) + " values but must have vocab_size " +
           std::to_string(lim.vocab_size) + " (or none)");
    }
    for (size_t i = 0; i < r.embedding_bias.size(); ++i)
      if (!std::isfinite(r.embedding_bias[i]))
        fail("embedding_bias[" + std::to_string(i) + "] must be finite, got " + num(r.embedding_bias[i]));
  }
  // Logits outputs are materialised per request; refuse what would exceed the executor's cap rather than
  // allocate it (max_logits_elements, ExecutorConfig).
  if (lim.max_logits_elements > 0) {
    const int64_t vocab = lim.vocab_size;
    if (r.output.return_context_logits && prompt * vocab > lim.max_logits_elements) {
      fail("return_context_logits: prompt length " + std::to_string(prompt) + " x vocab_size " + std::to_string(vocab) +
           " = " + std::to_string(prompt * vocab) + " values exceeds max_logits_elements " +
           std::to_string(lim.max_logits_elements));
    }
    const int64_t gen = beams * static_cast<int64_t>(r.max_tokens) * vocab;
    if (r.output.return_generation_logits && gen > lim.max_logits_elements) {
      fail("return_generation_logits: beam_width " + std::to_string(beams) + " x max_tokens " +
           std::to_string(r.max_tokens) + " x vocab_size " + std::to_string(vocab) + " = " + std::to_string(gen) +
           " values exceeds max_logits_elements " + std::to_string(lim.max_logits_elements));
    }
  }

  check_optional_id("end_id", r.end_id, lim.vocab_size);
  check_optional_id("pad_id", r.pad_id, lim.vocab_size);
  check_word_lists("stop_words", r.stop_words, lim.vocab_size);
  check_word_lists("bad_words", r.bad_words, lim.vocab_size);
}

}  // namespace engine
