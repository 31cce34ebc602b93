// Strongly connected components of the directed graphs a grammar makes (rules and the rules they refer to, rules and
// their tail callers), found without recursion: those graphs are as deep as a client's grammar nests, a chain of
// rules each referring to the next far longer than a thread's stack holds frames for.
#pragma once
#include <cstdint>
#include <vector>

namespace engine::grammar {

// component[v] for every node of `edges` (edges[v]: the nodes v leads to). Components are numbered in the order
// Tarjan's algorithm completes them, so an edge leads within its component or to a lower number: a pass that needs
// every successor's answer first runs through the components in increasing number.
std::vector<int32_t> strongly_connected_components(const std::vector<std::vector<int32_t>>& edges);

}  // namespace engine::grammar
