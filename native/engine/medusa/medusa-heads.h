// Medusa heads (Cai et al., 2024): small heads on the model's last hidden state (after the final norm), head k
// guessing the token k + 2 places after the position whose hidden state it reads — the model's own LM head gives
// the next one. Each head is `num_layers` residual blocks x + SiLU(W x + b), then its own vocabulary projection.
// The heads are read from the published layout (medusa-checkpoint.h); the model runs them on the rows the
// executor asks for (Model::head_guesses: the one that drew each sequence's last token), and the executor checks
// their guesses as a tree (medusa-tree.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "medusa/medusa-tree.h"

namespace engine {

struct MedusaHead {
  struct Block {
    std::vector<float> w;  // [hidden, hidden], nn.Linear layout
    std::vector<float> b;  // [hidden]
  };
  std::vector<Block> blocks;
  std::vector<float> out;  // [vocab, hidden]
};

struct MedusaHeads {
  int32_t hidden = 0, vocab = 0, num_layers = 0;
  std::vector<MedusaHead> heads;
  std::string source;  // the directory, for messages and the startup log
  int32_t num_heads() const { return static_cast<int32_t>(heads.size()); }
  size_t bytes() const;
};

// Each head's kMedusaTopK likeliest tokens (medusa-tree.h), best first, the lower id first on ties, for each of
// `rows` rows of `xn` ([rows, hidden], the final norm's output): guesses[(r * num_heads + k) * kMedusaTopK + j] is
// head k's j-th for row r (-1 past a vocabulary smaller than kMedusaTopK). Scratch space is the caller's.
void medusa_guesses(const MedusaHeads& heads, const float* xn, int64_t rows, int32_t* guesses,
                    std::vector<float>& scratch);

}  // namespace engine
