// Typed engine errors: every failure the engine reports carries a stable code (mirrored by the JS error class)
// and a message that names the field and the value received, so a user can act on it.
#pragma once
#include <stdexcept>
#include <string>

namespace engine {

enum class ErrorCode {
  invalid_argument,   // a request or config field is out of range / malformed
  not_found,          // a file or tensor is missing
  bad_checkpoint,     // a file is truncated, mis-shaped or of an unsupported dtype
  unsupported,        // an architecture or feature we do not implement
  queue_full,         // max_queue_size reached
  shutdown,           // the executor is shut down
  internal,           // a bug: an invariant was broken
};

const char* error_code_name(ErrorCode code);  // "invalid_argument", ... (stable strings, used by JS)

class EngineError : public std::runtime_error {
 public:
  EngineError(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }
 private:
  ErrorCode code_;
};

}  // namespace engine
