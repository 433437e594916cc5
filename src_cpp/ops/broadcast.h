// NumPy-style broadcasting of element-wise operands (ops/binary.cc, ops/compare.cc).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "common/error.h"
#include "graph/graph.h"

namespace clgpu {

// The broadcast shape of all `in`, or throws (naming `op`).
inline Shape BroadcastShapes(const char* op, const std::vector<Shape>& in) {
  size_t rank = 0;
  for (const Shape& s : in) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const Shape& s : in)
    for (size_t i = 0; i < s.size(); ++i) {
      int& o = out[rank - s.size() + i];
      if (s[i] != 1 && o != 1 && s[i] != o) {
        std::string shapes;
        for (const Shape& x : in) shapes += (shapes.empty() ? "" : " and ") + ShapeString(x);
        throw Error(std::string(op) + " shapes " + shapes + " do not broadcast");
      }
      if (s[i] != 1) o = s[i];
    }
  return out;
}

// Strides of `s` aligned to `out`'s rank, 0 along broadcast axes.
inline std::vector<int> BroadcastStrides(const Shape& s, const Shape& out) {
  std::vector<int> strides(out.size(), 0);
  int stride = 1;
  for (int i = static_cast<int>(s.size()) - 1; i >= 0; --i) {
    strides[out.size() - s.size() + i] = s[i] == 1 ? 0 : stride;
    stride *= s[i];
  }
  return strides;
}

}  // namespace clgpu
