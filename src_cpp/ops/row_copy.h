// SPLIT's launch (kernels/concat.cl): `rows` runs of `cols` elements between a tensor and
// column `col0` of a tensor `wide_cols` wide (split reads from the wide one), one work-item
// per element, or per 4 where every run starts and ends on a 4-element boundary. (CONCATENATION
// copies several inputs per launch instead: concat_multi in ops/concat.cc.)
#pragma once

#include <string>

#include "ops/op.h"

namespace clgpu {

// `name` is the kernel ("split_copy"; "4" is appended for the float4 form); `extra` follows
// the geometry arguments (none for split). `*vec4` is and-ed with
// whether this run took the float4 form.
template <typename... Extra>
Launch RowCopyLaunch(const Program& prog, const std::string& name, cl_mem src, cl_mem dst, int rows,
                     int cols, int wide_cols, int col0, bool* vec4, const Extra&... extra) {
  constexpr size_t kGroup = 64;  // work-items per group (the global size is padded to it)
  const bool vec = cols % 4 == 0 && wide_cols % 4 == 0 && col0 % 4 == 0;
  *vec4 = *vec4 && vec;
  const int div = vec ? 4 : 1;
  const int total = rows * cols / div;
  Launch l;
  l.name = vec ? name + "4" : name;
  l.kernel = CreateKernel(prog, l.name);
  SetArgs(l.kernel, src, dst, total, cols / div, wide_cols / div, col0 / div, extra...);
  l.dims = 1;
  l.global[0] = RoundUp(size_t(total), kGroup);
  l.local[0] = kGroup;
  return l;
}

}  // namespace clgpu
