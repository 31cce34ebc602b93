#include "loading/load-agreement.h"

#include <exception>
#include <string>

namespace engine {

namespace {
constexpr int kCodes = static_cast<int>(ErrorCode::internal) + 1;
}  // namespace

void agree_on_load(const LoadOptions& options, std::optional<ErrorCode> local_failure) {
  // failures[code]: ranks that failed with that code. Summed over the tp group, then over the pp group: every rank
  // sits in one of each, so the second sum counts the whole grid.
  float failures[kCodes] = {};
  if (local_failure) failures[static_cast<int>(*local_failure)] = 1;
  options.tp_comm.all_reduce_sum(failures, kCodes);
  options.pp_comm.all_reduce_sum(failures, kCodes);
  if (local_failure) return;  // the caller has the better message: its own
  int total = 0, code = -1;
  for (int c = 0; c < kCodes; ++c) {
    total += static_cast<int>(failures[c]);
    if (code < 0 && failures[c] > 0) code = c;
  }
  if (total == 0) return;
  throw EngineError(static_cast<ErrorCode>(code),
                    "loading the model failed on " + std::to_string(total) + " other rank(s) of the " +
                        std::to_string(options.shard.tp_size) + " x " + std::to_string(options.shard.pp_size) +
                        " (tp x pp) grid; their logs name the cause");
}

std::unique_ptr<Model> load_model_collective(const std::string& checkpoint_dir, const LoadOptions& options) {
  std::unique_ptr<Model> model;
  try {
    model = load_model(checkpoint_dir, options);
  } catch (const EngineError& e) {
    agree_on_load(options, e.code());
    throw;
  } catch (const std::exception&) {
    agree_on_load(options, ErrorCode::internal);
    throw;
  }
  agree_on_load(options, std::nullopt);
  return model;
}

}  // namespace engine
