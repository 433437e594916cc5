// The two launch forms of a split-K convolution (kernels/conv2d_implicit_gemm_splitk.cl), for the
// implicit GEMM and the depthwise-folded GEMM alike (conv2d_implicit_gemm.cc).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ops/conv2d_algorithm.h"
#include "ops/gemm.h"
#include "ops/op_helpers.h"

namespace clgpu {

// A split convolution's launches (its program built with SplitDefines): the split kernel and
// gemm_splitk_reduce, and where SplitKLastOffered the split kernel that stores the output itself
// (its tile counters the launch's state), one launch: a partition runs one form or the other
// (LaunchForm). `args`: the uploaded scalars and constants, which the split kernels take after
// their buffers.
std::vector<Launch> SplitLaunches(OpContext& ctx, std::shared_ptr<Program> prog, const GemmPlan& p,
                                  long m, int oc, cl_mem in, ParamBlock& args, cl_mem bias,
                                  cl_mem out, float act_min, float act_max, cl_mem residual,
                                  cl_mem slopes);

// The split kernels' program defines for `splits` splits.
std::string SplitDefines(const OpContext& ctx, int splits);

}  // namespace clgpu
