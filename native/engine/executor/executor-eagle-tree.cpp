// EAGLE's trees of guesses (ExecutorConfig::eagle_choices; TensorRT-LLM's eagle_choices, EAGLE-1's static trees):
// from the root — the draft's last slot caught up, which read the sequence's last token — the draft guesses depth
// by depth. A node's children are its best guesses at the ranks its paths list (medusa/medusa-tree.h's choice_tree
// gives the shape). Each pass feeds the nodes of one depth that have children, for every sequence at once, each
// beside its parent's output (a guess's feature, as in the chain) and seeing the draft's past and its own ancestors
// only: the tree's earlier nodes stay in the draft's K/V from the passes before (SequenceChunk::tree_past), and a
// sibling's are masked. The nodes sit past draft_computed in the draft's pool, so the next step's catch-up writes
// over them with the model's features: no slot a guess fed is ever kept, whichever branch the model accepts.
#include <algorithm>

#include "executor/executor-impl.h"

namespace engine {
namespace {

// One sequence's tree as it grows. Per node of `shape`: its token (-1: left out, or not known yet), its best
// guesses and its output once a pass fed it (the root's from the catch-up), its index in the tree fed so far.
struct GrowingTree {
  ChoiceTree shape;
  std::vector<int32_t> token, fed_index;
  std::vector<std::vector<int32_t>> top;
  std::vector<float> out;             // [nodes, hidden]
  std::vector<uint8_t> has_children;
  std::vector<int32_t> fed_parents;   // the tree in the draft's pool: the root, then the nodes fed, by fed index
};

}  // namespace

std::vector<TokenTree> Executor::Impl::grow_eagle_trees(const IterationBatch& b, const std::vector<DraftAsk>& asks,
                                                        const std::vector<int32_t>& room,
                                                        const std::vector<int32_t>& known,
                                                        const std::vector<std::vector<int32_t>>& root_top,
                                                        const std::vector<float>& root_out) {
  const auto H = static_cast<size_t>(model_config.hidden_size);
  std::vector<GrowingTree> trees(asks.size());
  int32_t deepest = 0;
  for (size_t k = 0; k < asks.size(); ++k) {
    if (root_top[k].empty() || room[k] <= 0) continue;
    GrowingTree& g = trees[k];
    g.shape = choice_tree(eagle_choices, room[k], asks[k].depth);
    const auto n = static_cast<size_t>(g.shape.size());
    g.token.assign(n, -1);
    g.fed_index.assign(n, -1);
    g.top.assign(n, {});
    g.out.assign(n * H, 0.0f);
    g.has_children.assign(n, 0);
    for (size_t i = 1; i < n; ++i) {
      g.has_children[static_cast<size_t>(g.shape.parent[i])] = 1;
      deepest = std::max(deepest, g.shape.depth[i]);
    }
    g.top[0] = root_top[k];
    std::copy_n(root_out.begin() + static_cast<std::ptrdiff_t>(k * H), H, g.out.begin());
    g.fed_index[0] = 0;
    g.fed_parents = {-1};
  }
  std::vector<SequenceChunk> chunks;
  std::vector<size_t> who;
  std::vector<std::vector<size_t>> nodes;  // per chunk: its tokens' nodes
  std::vector<float> features;
  ForwardOutput fo;
  for (int32_t d = 1; d <= deepest; ++d) {
    chunks.clear();
    who.clear();
    nodes.clear();
    features.clear();
    for (size_t k = 0; k < asks.size(); ++k) {
      GrowingTree& g = trees[k];
      SequenceChunk c;
      std::vector<size_t> fed;
      for (size_t n = 1; n < g.token.size(); ++n) {
        if (g.shape.depth[n] != d) continue;
        const std::vector<int32_t>& top = g.top[static_cast<size_t>(g.shape.parent[n])];
        const auto r = static_cast<size_t>(g.shape.rank[n]);
        if (r >= top.size()) continue;  // (its parent left out, or a vocabulary smaller than the rank)
        g.token[n] = top[r];
        if (!g.has_children[n]) continue;  // a leaf needs no pass: nothing hangs from its output
        c.tokens.push_back(g.token[n]);
        fed.push_back(n);
      }
      if (fed.empty()) continue;
      const Sequence& s = *b.seqs[asks[k].chunk];
      c.tree_past = static_cast<int32_t>(g.fed_parents.size());
      c.past_len = known[k] - 1 + c.tree_past;  // the root at the draft's last caught-up slot, known[k] - 1
      c.tree_parents = g.fed_parents;
      for (size_t n : fed) {
        c.tree_parents.push_back(g.fed_index[static_cast<size_t>(g.shape.parent[n])]);
        features.insert(features.end(), g.out.begin() + static_cast<std::ptrdiff_t>(g.shape.parent[n] * H),
                        g.out.begin() + static_cast<std::ptrdiff_t>((g.shape.parent[n] + 1) * H));
      }
      for (size_t n : fed) {
        g.fed_index[n] = static_cast<int32_t>(g.fed_parents.size());
        g.fed_parents.push_back(c.tree_parents[g.fed_parents.size()]);
      }
      c.block_ids = s.draft_blocks;
      c.all_logits = true;  // every fed node's guesses
      chunks.push_back(std::move(c));
      who.push_back(k);
      nodes.push_back(std::move(fed));
    }
    if (chunks.empty()) continue;
    draft_model->set_input_features(features.data(), static_cast<int64_t>(H));
    draft_model->forward(chunks, fo);
    int64_t rows = 0;
    const float* hidden = draft_model->final_hidden(rows);
    const int32_t vocab = std::min(vocab_size, fo.vocab_size);
    for (size_t i = 0; i < chunks.size(); ++i) {
      GrowingTree& g = trees[who[i]];
      for (size_t j = 0; j < nodes[i].size(); ++j) {
        const auto row = static_cast<size_t>(fo.first_row[i]) + j;
        const size_t n = nodes[i][j];
        g.top[n] = top_choices(fo.logits.data() + row * static_cast<size_t>(fo.vocab_size), vocab);
        std::copy_n(hidden + row * H, H, g.out.begin() + static_cast<std::ptrdiff_t>(n * H));
      }
    }
  }
  // Each tree in the shape's depth-first order (the first choices' chain right after the root), without the nodes
  // left out and their subtrees.
  std::vector<TokenTree> out(asks.size());
  for (size_t k = 0; k < asks.size(); ++k) {
    const GrowingTree& g = trees[k];
    std::vector<int32_t> index(g.token.size(), -1);
    if (!index.empty()) index[0] = 0;
    for (size_t n = 1; n < g.token.size(); ++n) {
      const int32_t parent = index[static_cast<size_t>(g.shape.parent[n])];
      if (parent < 0 || g.token[n] < 0) continue;
      out[k].tokens.push_back(g.token[n]);
      out[k].parents.push_back(parent);
      index[n] = static_cast<int32_t>(out[k].tokens.size());
    }
  }
  return out;
}

}  // namespace engine
