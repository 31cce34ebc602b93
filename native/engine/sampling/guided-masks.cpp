#include "sampling/guided-masks.h"

#include <omp.h>

#include <algorithm>
#include <map>

namespace engine {

void precompute_guided_positions(const std::vector<Sequence*>& seqs) {
  std::map<const grammar::CompiledGrammar*, std::vector<int32_t>> tops;
  for (Sequence* s : seqs)
    if (s->matcher) s->matcher->next_positions(tops[&s->matcher->grammar()]);
  for (auto& [g, positions] : tops) {
    try {
      g->precompute(std::move(positions));
    } catch (...) {  // (out of memory) the fills compute what is missing, or report it
    }
  }
}

void fill_guided_masks(const std::vector<Sequence*>& seqs, std::vector<SequenceChunk>& chunks,
                       std::vector<uint8_t>* no_token) {
  std::vector<size_t> guided;
  std::vector<Sequence*> guided_seqs;
  for (size_t i = 0; i < chunks.size() && i < seqs.size(); ++i)
    if (chunks[i].sample_on == SampleOn::device && seqs[i]->matcher) {
      guided.push_back(i);
      guided_seqs.push_back(seqs[i]);
    }
  if (guided.empty()) return;
  precompute_guided_positions(guided_seqs);
  const int n = static_cast<int>(guided.size());
  // A warm mask takes about a microsecond and a cold position milliseconds: threads only pay when there are many.
  const int threads = std::max(1, std::min(n, omp_get_max_threads()));  // (each fill is now a microsecond or so)
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads) if (n > 1)
  for (int k = 0; k < n; ++k) {
    const size_t i = guided[static_cast<size_t>(k)];
    std::vector<uint64_t>& mask = chunks[i].device_sampling.allowed;
    bool any = false;
    try {
      seqs[i]->matcher->fill_mask(mask);
      any = std::any_of(mask.begin(), mask.end(), [](uint64_t w) { return w != 0; });
    } catch (...) {  // (out of memory) the host step computes it again and reports what goes wrong
    }
    if (any) continue;
    if (no_token != nullptr) {
      mask.assign(seqs[i]->matcher->grammar().vocab().mask_words(), 0);
      (*no_token)[i] = 1;
    } else {
      mask.clear();
      chunks[i].sample_on = SampleOn::host;
    }
  }
}

}  // namespace engine
