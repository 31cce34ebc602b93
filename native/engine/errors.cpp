#include "errors.h"

namespace engine {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::not_found: return "not_found";
    case ErrorCode::bad_checkpoint: return "bad_checkpoint";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::queue_full: return "queue_full";
    case ErrorCode::shutdown: return "shutdown";
    case ErrorCode::internal: return "internal";
  }
  return "internal";
}

}  // namespace engine
