#include "ops/index_chain.h"

#include <cstring>

#include "common/error.h"

namespace clgpu {
namespace {

std::vector<int> Strides(const Shape& s) {
  std::vector<int> st(s.size(), 1);
  for (size_t a = s.size(); a-- > 1;) st[a - 1] = st[a] * s[a];
  return st;
}

}  // namespace

IndexStage TransposeStage(const Shape& in, const Shape& out, const std::vector<int>& perm) {
  const std::vector<int> st = Strides(in);
  IndexStage s;
  s.out = out;
  for (size_t d = 0; d < perm.size(); ++d) {
    s.coef.push_back(st.at(size_t(perm[d])));
    s.off.push_back(0);
    s.bound.push_back(0);
  }
  return s;
}

IndexStage PadStage(const Shape& in, const Shape& out, const std::vector<int>& before, int mode,
                    float value) {
  const std::vector<int> st = Strides(in);
  IndexStage s;
  s.out = out, s.mode = mode, s.value = value;
  s.coef = st;
  s.off = before;
  for (size_t a = 0; a < in.size(); ++a) s.bound.push_back(out[a] != in[a] ? in[a] : 0);
  return s;
}

std::vector<int> ChainMeta(const std::vector<IndexStage>& stages) {
  std::vector<int> m{0};
  for (const IndexStage& s : stages) {
    if (s.out.empty()) continue;
    // Axes of extent 1 read coordinate 0 (the pad stage keeps them: they may be out of bounds).
    std::vector<size_t> axes;
    for (size_t d = 0; d < s.out.size(); ++d)
      if (s.out[d] != 1 || s.bound[d] > 0 || s.off[d] != 0) axes.push_back(d);
    if (s.base < 0 || s.base > INT32_MAX) throw Error("gather chain offset out of range");
    int bits;
    std::memcpy(&bits, &s.value, sizeof bits);
    m.insert(m.end(), {static_cast<int>(axes.size()), s.mode, static_cast<int>(s.base), bits});
    for (size_t d : axes) m.insert(m.end(), {s.out[d], s.coef[d], s.off[d], s.bound[d]});
    ++m[0];
  }
  return m;
}

}  // namespace clgpu
