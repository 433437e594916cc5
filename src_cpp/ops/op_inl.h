// Template definitions for ops/op.h.
#pragma once

#include "cl/errors.h"

namespace clgpu {
namespace detail {
inline void SetArgsAt(const Kernel&, cl_uint) {}
template <typename A, typename... Rest>
void SetArgsAt(const Kernel& k, cl_uint i, const A& a, const Rest&... rest) {
  CheckCl(Cl().clSetKernelArg(k.get(), i, sizeof(A), &a), "clSetKernelArg");
  SetArgsAt(k, i + 1, rest...);
}
}  // namespace detail

template <typename... Args>
void SetArgs(const Kernel& k, const Args&... args) {
  detail::SetArgsAt(k, 0, args...);
}

template <typename... Args>
void SetArgsFrom(const Kernel& k, cl_uint first, const Args&... args) {
  detail::SetArgsAt(k, first, args...);
}

template <typename... Args>
void SetArgsAndOptional(const Kernel& k, cl_mem extra, const Args&... args) {
  detail::SetArgsAt(k, 0, args...);
  if (extra) detail::SetArgsAt(k, static_cast<cl_uint>(sizeof...(Args)), extra);
}

}  // namespace clgpu
