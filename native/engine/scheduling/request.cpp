#include "scheduling/request.h"

namespace engine {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::not_finished: return "not_finished";
    case FinishReason::end_id: return "end_id";
    case FinishReason::stop_words: return "stop_words";
    case FinishReason::length: return "length";
    case FinishReason::timed_out: return "timed_out";
    case FinishReason::cancelled: return "cancelled";
  }
  return "not_finished";
}

const char* guide_type_name(GuideType t) {
  switch (t) {
    case GuideType::json: return "json";
    case GuideType::json_schema: return "json_schema";
    case GuideType::regex: return "regex";
    case GuideType::ebnf_grammar: return "ebnf_grammar";
  }
  return "json";
}

}  // namespace engine
