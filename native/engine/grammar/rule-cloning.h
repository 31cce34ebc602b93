// Gives small shared rules one caller each. The token-mask precomputation (compiled-grammar.h) follows a rule's end
// into its caller only where that caller is unique; a rule used from many places — JSON's character rule inside
// json-char{0,40}, a value rule used by every property — would otherwise leave nearly every token's answer to be
// worked out from the real stacks at every step. A non-recursive rule of at most kCloneRuleElements elements (its
// sub-rules counted) gets a copy per use, within a budget on the grammar's growth.
#pragma once
#include <vector>

#include "grammar/grammar.h"

namespace engine::grammar {

constexpr size_t kCloneRuleElements = 96;

// Rewrites references in `rules` (root is never cloned). Call before positions are computed.
void clone_shared_rules(std::vector<Rule>& rules, int32_t root);

}  // namespace engine::grammar
