// Which candidates a Medusa step checks (Cai et al., 2024, "tree attention"): a list of choices, each a path of
// ranks — [0, 1] is head 0's first choice followed by head 1's second — as TensorRT-LLM's `medusa_choices` lists
// them. The step feeds the tree of the chosen candidates in one pass (SequenceChunk::tree_parents) and keeps the
// longest branch the model's own draws follow. EAGLE heads' trees (`eagle_choices`, EAGLE-1's static trees) are
// the same paths, a rank there being one among the draft's best guesses after the path's parent.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace engine {

using MedusaChoices = std::vector<std::vector<int32_t>>;

// How many of each head's best tokens the heads report (ranks of a choice are below it).
inline constexpr int32_t kMedusaTopK = 10;

// Without choices given: every path of at most `num_heads` ranks whose ranks sum to at most 2, ordered by that sum,
// then depth, then rank — so the first n of them are, roughly, the n likeliest (the chain of first choices first).
MedusaChoices default_medusa_choices(int32_t num_heads);

// "" when `choices` can be used with `num_heads` heads, else what is wrong with which path (each path non-empty, no
// deeper than the heads, ranks in [0, kMedusaTopK), listed after its parent, no path twice, at most 63 paths).
std::string check_medusa_choices(const MedusaChoices& choices, int32_t num_heads);
// The same check for an EAGLE draft, which guesses as deep as a path goes (so no depth limit but the paths').
std::string check_eagle_choices(const MedusaChoices& choices);

// The shape of the tree a step checks, before its tokens are known: the first `max_nodes` choices no deeper than
// `max_depth`, in depth-first order with each node's children by rank — so the chain of first choices, the likeliest
// branch, sits right after the root, where a causal chunk would have it. Node 0 is the root (parent -1, rank -1,
// depth 0); node i's parent is an earlier node.
struct ChoiceTree {
  std::vector<int32_t> parent, rank, depth;  // [nodes]
  int32_t size() const { return static_cast<int32_t>(parent.size()); }
};
ChoiceTree choice_tree(const MedusaChoices& choices, int32_t max_nodes, int32_t max_depth);

// The tree a step checks, without its root (the step's input token, node 0): choice_tree's nodes with their tokens.
// parents[i] is node i + 1's parent (0: the root). `top` holds each head's best tokens, [num_heads][kMedusaTopK].
struct TokenTree {
  std::vector<int32_t> tokens;
  std::vector<int32_t> parents;
  bool is_chain() const;  // every node's parent is the node before it
};
TokenTree build_token_tree(const MedusaChoices& choices, const int32_t* top, int32_t max_nodes, int32_t max_depth);

}  // namespace engine
