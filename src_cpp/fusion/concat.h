// What the concatenation folds share (fusion/concat.cc, fusion/concat_chain.cc): which nodes are
// concatenations they take, and which convolutions can write into a concatenation's tensor.
#pragma once

#include <cstddef>
#include <map>
#include <optional>

#include "fusion/pass.h"

namespace clgpu {

// The node's axis when it is a float CONCATENATION without an activation; else nothing.
std::optional<int> ConcatAxis(const GraphView& g, const NodeInfo& n);

// What each float convolution's kernel writes, with its folds so far -> the convolution, where
// it can write into a concatenation's tensor (what the default algorithm writes).
std::map<int, size_t> SliceWriters(const FoldGraph& fg, const Folds* folds);

// Whether plan op p writes t as it is, whole, and can write it into a concatenation instead.
bool WritesIntoConcat(FoldPlan& plan, size_t p, int t);

}  // namespace clgpu
