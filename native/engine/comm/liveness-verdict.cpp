#include "comm/liveness-verdict.h"

#include <cstdio>

namespace engine {

std::string describe_activity(const RankActivity& a) {
  if (a.waiting_for.empty()) return a.step;
  return a.step + ": " + a.waiting_for;
}

static std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", s);
  return buf;
}

std::string describe_hang(const RankActivity& self, const std::vector<RankActivity>& culprits,
                          const std::vector<RankActivity>& waiting) {
  const std::string when = " for " + seconds_text(self.seconds) + " s in iteration " + std::to_string(self.iteration) +
                           " (" + describe_activity(self) + ")";
  std::string out;
  if (!culprits.empty()) {
    for (size_t i = 0; i < culprits.size(); ++i) {
      if (i > 0) out += ", ";
      out += "rank " + std::to_string(culprits[i].rank) + " on " + culprits[i].host;
    }
    return out + " made no progress" + when;
  }
  out = "no rank made progress" + when + "; every rank answered:";
  for (const RankActivity& w : waiting) {
    out += " rank " + std::to_string(w.rank) + " in iteration " + std::to_string(w.iteration) + " (" +
           describe_activity(w) + ");";
  }
  if (!waiting.empty()) out.pop_back();
  return out;
}

HangVerdict judge_hang(const RankActivity& self, const std::vector<RankActivity>& others) {
  HangVerdict verdict;
  std::vector<RankActivity> silent, waiting;
  for (const RankActivity& o : others) {
    if (o.answered) {
      waiting.push_back(o);
    } else {
      silent.push_back(o);
      verdict.culprits.push_back(o.rank);
    }
  }
  verdict.reason = describe_hang(self, silent, waiting);
  return verdict;
}

}  // namespace engine
