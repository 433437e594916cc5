#include "ops/split_k_forms.h"

#include <utility>

#include "cl/int8_dot.h"

namespace clgpu {

std::vector<Launch> SplitLaunches(OpContext& ctx, std::shared_ptr<Program> prog, const GemmPlan& p,
                                  long m, int oc, cl_mem in, ParamBlock& args, cl_mem bias,
                                  cl_mem out, float act_min, float act_max, cl_mem residual,
                                  cl_mem slopes) {
  const auto split_kernel = [&](const char* name) {
    Launch l = Make1d(prog, name, p.tiles.Global(m, oc), p.tiles.work_group());
    l.dims = 2;
    l.global[1] = p.splits;
    l.local[1] = 1;
    return l;
  };
  std::vector<Launch> launches;
  if (SplitKLastOffered(ctx.env.device(), p.splits)) {
    Launch l = split_kernel("conv2d_implicit_gemm_splitk_last");
    l.state = ZeroBuffer(ctx, l.global[0] / l.local[0] * sizeof(cl_int));
    SetArgsAndOptional(l.kernel, residual, in, ctx.scratch[0], out);
    const cl_uint next = residual ? 4 : 3;
    SetArgsFrom(l.kernel, next, l.state.get());
    args.Set(l.kernel, next + 1);
    l.form = LaunchForm::kFewerLaunches;
    launches.push_back(std::move(l));
  }
  Launch l = split_kernel("conv2d_implicit_gemm_splitk");
  SetArgs(l.kernel, in, ctx.scratch[0]);
  args.Set(l.kernel, 2);
  l.consts = args.TakeBuffer();
  Launch r = Make1d(prog, "gemm_splitk_reduce", size_t(m) * oc);
  SetArgsAndOptional(r.kernel, residual, ctx.scratch[0], bias, out, static_cast<int>(m), oc,
                     p.splits, act_min, act_max);
  SetReduceExtras(r.kernel, ctx, residual, slopes);
  if (!launches.empty()) l.form = r.form = LaunchForm::kShorterDevice;
  launches.push_back(std::move(l));
  launches.push_back(std::move(r));
  return launches;
}

std::string SplitDefines(const OpContext& ctx, int splits) {
  return SplitKLastOffered(ctx.env.device(), splits)
             ? "-DSPLIT_K -DSPLIT_K_LAST " + PtxDefines(ctx.env.device())
             : "-DSPLIT_K";
}

}  // namespace clgpu
