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

}  // namespace engine
