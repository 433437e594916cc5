// The int8 inverted-residual block in one launch (kernels/inverted_residual_int8.cl): its plan
// and its launch, for the 1x1 int8 convolution that folded a depthwise and that depthwise's
// expand (fusion/expand.cc). Where it cannot run a block, the int8 GEMM's EXPAND_A does.
#include <algorithm>
#include <optional>
#include <string>

#include "cl/int8_dot.h"
#include "common/error.h"
#include "ops/conv2d_algorithm.h"
#include "ops/conv2d_selector.h"
#include "ops/gemm_int8.h"

namespace clgpu {
namespace {

// The launch's integers (the kernel's prm): the constant buffers' offsets, then from kN the
// geometry and the plan, from kExUpBelow the stages' parameters.
enum Int8BlockParam { kRp = 9, kN = 10, kRows = 22, kExUpBelow = 25, kParamCount = 38 };

// As the float block kernel: groups of 256, at most 8 outputs summed and 8 groups of four
// expanded channels computed per work-item.
constexpr int kWg = 256, kOutputsPerItem = 8, kExpandsPerItem = 8;

struct Int8BlockPlan {
  int rows = 1, chunk = 0, lanes = 1, outputs_per_item = 1, expands_per_item = 1;
  long local_ints = 0, groups = 0;
};

long CeilDiv(long a, long b) { return (a + b - 1) / b; }

// How the kernel runs this block, or nullopt: as the float block's plan (PlanBlock), `rows`
// output rows of one image per group (about one group per compute unit), their every output
// channel, `chunk` expanded channels a pass and at most two passes of equal width, everything
// in local memory (at most 7/8 of the device's, and 44 KB). Bytes are packed four to an int,
// so a block needs a quarter of the float one's memory: the spotters' blocks take one pass.
std::optional<Int8BlockPlan> PlanInt8Block(const DeviceInfo& dev, const ConvGeometry& dw, int ec,
                                           int oc) {
  if (ec <= 0 || ec % 4 || dw.c <= 0 || dw.c % 4 || dw.oc != dw.c || dw.n <= 0 || dw.oh <= 0 ||
      dw.ow <= 0 || oc <= 0 || dw.kh <= 0 || dw.kw <= 0 || dev.max_work_group_size < size_t(kWg) ||
      !BlockKernelAllowed())
    return std::nullopt;
  // A block under the float chain cap stays with the GEMM's EXPAND_A: there the sweep's blocks
  // ran 0.71-1.40x as long in this kernel, no rule between (H200,
  // bench/results/ab-options-block-sweep2-NVIDIA_H200.md). Past it this kernel takes the small
  // blocks it plans (BlockItemsFit), even where the int8 GEMM's longer chain
  // (expand_chain_cap_int8) would fold them: the 9-tap spotter blocks ran 1.24-1.26x as long
  // there (ab-options-int8-chain-NVIDIA_H200.md).
  if (long(dw.kh) * dw.kw * ec <= ExpandChainCap(dev)) return std::nullopt;
  const long budget = long(BlockLocalFloats(dev));
  const long units = std::max(dev.compute_units, 1);
  const long ec4 = ec / 4, c4 = dw.c / 4, wstride = ec4 | 1;
  int rows = int(std::clamp<long>(CeilDiv(long(dw.n) * dw.oh, units), 1, dw.oh));
  for (; rows >= 1; --rows) {
    const long outputs = long(rows) * dw.ow * oc;
    if (outputs > long(kWg) * kOutputsPerItem) continue;
    Int8BlockPlan p;
    p.rows = rows;
    const long lane_cap = std::min<long>(32, c4);
    while (p.lanes * 2 <= lane_cap && outputs * p.lanes * 2 <= long(kWg) * kOutputsPerItem)
      p.lanes *= 2;
    const long in_pixels = (long(rows - 1) * dw.sh + long(dw.kh - 1) * dw.dh + 1) * dw.w;
    const long fixed = in_pixels * ec4;
    if (fixed >= budget || !BlockItemsFit(dev, in_pixels, dw.c, ec)) continue;
    // Per four expanded channels (the kernel's layout): four weight rows, the taps, two biases
    // and two stages of four, the expand's and the depthwise's outputs.
    const long per4 = 4 * wstride + long(dw.kh) * dw.kw + 8 + 16 + in_pixels + long(rows) * dw.ow;
    long chunk4 = std::min({c4, (budget - fixed) / per4, long(kWg) * kExpandsPerItem / in_pixels});
    if (chunk4 <= 0 || CeilDiv(c4, chunk4) > 2) continue;
    if (const long cap = BlockChunkCap()) chunk4 = std::min(chunk4, cap / 4);
    chunk4 = CeilDiv(c4, CeilDiv(c4, chunk4));  // passes of equal width
    if (outputs * p.lanes > budget) continue;
    p.chunk = int(4 * chunk4);
    p.outputs_per_item = int(CeilDiv(outputs * p.lanes, kWg));
    p.expands_per_item = int(CeilDiv(in_pixels * chunk4, kWg));
    p.local_ints = std::max(fixed + per4 * chunk4, outputs * p.lanes);
    p.groups = long(dw.n) * CeilDiv(dw.oh, rows);
    return p;
  }
  return std::nullopt;
}

}  // namespace

double Int8BlockExpandProducts(const DeviceInfo& dev, const ConvGeometry& dw, int oc, int ec) {
  const std::optional<Int8BlockPlan> p = PlanInt8Block(dev, dw, ec, oc);
  if (!p) return -1;
  const double in_pixels = (double(p->rows - 1) * dw.sh + double(dw.kh - 1) * dw.dh + 1) * dw.w;
  return double(p->groups) * in_pixels * dw.c * ec;
}

std::vector<Launch> EncodeInt8Block(OpContext& ctx, const Int8GemmWeights& w, cl_mem in, cl_mem out,
                                    int a_zero, const OutputStage& s, Int8GemmState* state,
                                    const Int8Residual* residual, const Int8DepthwiseA& dw,
                                    std::string* path_used) {
  const ConvGeometry& g = dw.g;
  if (!dw.expand || !s.table.empty() || w.k != g.c || w.kp != w.k || dw.expand->n != g.c ||
      dw.expand->kp != dw.expand->k)
    return {};
  const std::optional<Int8BlockPlan> p = PlanInt8Block(ctx.env.device(), g, dw.expand->k, w.n);
  if (!p) return {};
  ParamBlock prm(kParamCount);
  const int geometry[] = {g.n,  g.h,  g.w,       g.oh,       g.ow,    w.n,      g.sh,    g.sw,
                          g.dh, g.dw, g.pad_top, g.pad_left, p->rows, p->chunk, p->lanes};
  static_assert(sizeof geometry / sizeof(int) == kExUpBelow - kN, "the kernel's order");
  for (size_t i = 0; i < std::size(geometry); ++i) prm.Int(kN + i, geometry[i]);
  const int stages[] = {dw.expand_up_below, dw.expand_zero, dw.expand_min, dw.expand_max,
                        dw.in_zero,         dw.up_below,    a_zero,        dw.act_min,
                        dw.act_max,         s.up_below,     s.zero_point,  s.act_min,
                        s.act_max};
  static_assert(kExUpBelow + sizeof stages / sizeof(int) == kParamCount, "the kernel's order");
  for (size_t i = 0; i < std::size(stages); ++i) prm.Int(kExUpBelow + i, stages[i]);
  const cl_mem slots[] = {dw.expand->b.get(),
                          dw.expand->bias.get(),
                          dw.expand->stage.get(),
                          dw.filter,
                          dw.bias,
                          dw.stage,
                          w.b.get(),
                          w.bias.get(),
                          w.stage.get()};
  for (size_t i = 0; i < std::size(slots); ++i) prm.Slot(i, slots[i]);
  state->residual_params = residual ? UploadInts(ctx, residual->params) : Buffer();
  if (residual) prm.Slot(kRp, state->residual_params.get());
  std::string defines = "-DDW_KH=" + std::to_string(g.kh) + " -DDW_KW=" + std::to_string(g.kw) +
                        " -DIRB_EC=" + std::to_string(dw.expand->k) +
                        " -DIRB_C=" + std::to_string(g.c) +
                        " -DIRB_OPT=" + std::to_string(p->outputs_per_item) +
                        " -DIRB_YPT=" + std::to_string(p->expands_per_item) +
                        " -DIRB_LOCAL=" + std::to_string(p->local_ints);
  if (residual) defines += " -DQUANT_RESIDUAL";
  const std::string packed = prm.Upload(ctx);
  if (!packed.empty()) defines += " " + packed;
  // The device's dot-product path, else the portable one; a program that builds neither way
  // leaves the block to the GEMM.
  std::string path = Int8DotPathOf(ctx);
  std::shared_ptr<Program> prog;
  for (;;) {
    try {
      const std::string dot = Int8DotDefines(path);
      prog = ctx.GetProgram("inverted_residual_int8", dot.empty() ? defines : defines + " " + dot);
      break;
    } catch (const BuildError&) {
      if (path == "portable") return {};
      path = "portable";
    }
  }
  Launch l = Make1d(prog, "inverted_residual_int8", size_t(p->groups) * kWg, kWg);
  // A compiler that cannot fit the group: the GEMM runs the block instead.
  if (!BlockGroupFits(ctx, l.kernel, kWg, "inverted_residual_int8")) return {};
  state->consts = prm.TakeBuffer();
  SetArgs(l.kernel, in, out);
  const cl_uint next = prm.Set(l.kernel, 2);
  if (residual) SetArgsFrom(l.kernel, next, residual->operand);
  if (path_used) *path_used = path;
  std::vector<Launch> launches;
  launches.push_back(std::move(l));
  return launches;
}

}  // namespace clgpu
