#include "executor/iteration-phases.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace engine {

IterationPhases::IterationPhases() {
  const char* v = std::getenv("TRTLLM_ITER_PHASES");
  on_ = v != nullptr && std::strcmp(v, "1") == 0;
}

void IterationPhases::report() {
  if (!on_ || iterations_ == 0) return;
  static const char* names[] = {"plan+chunks",
                                "forward call",
                                "  of it until the sampling prep",
                                "  the sampling prep",
                                "  after it (device, sampling)",
                                "  guided check",
                                "sample and update",
                                "  of it redraws",
                                "    their row copies",
                                "stats+delivery"};
  static_assert(sizeof(names) / sizeof(names[0]) == static_cast<size_t>(IterPhase::count), "a name per phase");
  const double n = static_cast<double>(iterations_);
  std::fprintf(stderr, "iteration phases over %lld decode-only iterations (%lld redraws), us per iteration:\n",
               static_cast<long long>(iterations_), static_cast<long long>(redraws_));
  for (size_t i = 0; i < sums_.size(); ++i) std::fprintf(stderr, "  %-32s %9.1f\n", names[i], sums_[i] / n);
  const int64_t rows = rows_.load();
  if (rows > 0)
    std::fprintf(stderr, "  guided check rows %.1f per iteration, %.2f us of work each\n", static_cast<double>(rows) / n,
                 static_cast<double>(row_ns_.load()) / 1e3 / static_cast<double>(rows));
  iterations_ = redraws_ = 0;
  row_ns_ = 0;
  rows_ = 0;
  sums_.fill(0.0);
}

}  // namespace engine
