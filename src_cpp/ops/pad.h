// PAD, PADV2 and MIRROR_PAD as the graph writes them (ops/pad.cc runs them; fusion/pad.cc folds
// a PAD of zeros into the convolution reading it).
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"

namespace clgpu {

// The modes kernels/pad.cl switches on.
constexpr int kPadConstant = 0, kPadReflect = 1, kPadSymmetric = 2;

struct PadSpec {
  int mode = kPadConstant;
  float value = 0;  // kPadConstant: the value (int8: the integer, e.g. the zero point)
  std::vector<int> before, after;  // per axis
};

// "" and *spec, or why the node cannot run on the device.
std::string ReadPadSpec(const GraphView& g, const NodeInfo& node, PadSpec* spec);

}  // namespace clgpu
