#include "ops/reduce_tiled.h"

#include <algorithm>
#include <cstdint>

#include "common/error.h"

namespace clgpu {
namespace {

constexpr int kMaxGroup = 256;  // RED_LOCAL in kernels/reduce.cl
constexpr int kMinGroup = 32;   // smaller groups run one work-item per output instead
constexpr int kSum = 0, kPoolMax = 4;

int FloorPow2(int x) {
  int p = 1;
  while (p * 2 <= x) p *= 2;
  return p;
}
int CeilPow2(int64_t x) {
  int p = 1;
  while (p < x) p *= 2;
  return p;
}

// The largest power-of-2 group this kernel may run with on this device (registers or the
// device can cap it below kMaxGroup).
int GroupLimit(OpContext& ctx, const Kernel& k) {
  return static_cast<int>(RowGroup(ctx, k, kMaxGroup, INT64_MAX));
}

}  // namespace

bool TiledReductionIsTiny(int64_t reduce, int64_t inner) {
  return CeilPow2(std::min<int64_t>(inner, 64)) * CeilPow2(std::min<int64_t>(reduce, kMaxGroup)) <
         kMinGroup;
}

int TiledReductionSlices(const TiledReduction& r) {
  // Slices are combined with the same operation: sums (of already divided parts) and the
  // pool's max only; MAX/MIN's NaN rule needs the inputs in order.
  if ((r.red_op != kSum && r.red_op != kPoolMax) || r.has_epilogue) return 1;
  // Enough groups for four per compute unit, each still walking 64 rows or more: a batch of
  // squeeze-excite MEANs (outer = the batch) left groups of thousands of rows on a third of
  // the units.
  const int64_t groups = r.outer * ((r.inner + 63) / 64);
  const int64_t target = 4L * (r.compute_units > 0 ? r.compute_units : 32);
  if (2 * groups >= target || r.reduce < 256) return 1;
  return static_cast<int>(std::min<int64_t>((target + groups - 1) / groups, r.reduce / 64));
}

size_t TiledReductionScratchBytes(const TiledReduction& r, size_t elem_bytes) {
  const int slices = TiledReductionSlices(r);
  return slices > 1 ? static_cast<size_t>(r.outer * slices * r.inner) * elem_bytes : 0;
}

std::string AppendTiledReduction(OpContext& ctx, const TiledReduction& r, cl_mem in, cl_mem out,
                                 std::vector<Launch>* launches) {
  const std::string op = "-DRED_OP=" + std::to_string(r.red_op);
  const int slices = TiledReductionSlices(r);
  if (slices > 1 && ctx.scratch.empty()) throw Error("split reduction without scratch");
  auto prog = ctx.GetProgram("reduce", op);
  Launch l;
  l.name = "reduce_tiled";
  l.kernel = CreateKernel(*prog, l.name);
  const int group = GroupLimit(ctx, l.kernel);
  // Up to 64 inner columns per group, the rest of the group along the reduced extent.
  const int lx = std::min(CeilPow2(std::min<int64_t>(r.inner, 64)), group);
  const int ly = std::min(FloorPow2(group / lx), CeilPow2(std::min<int64_t>(r.reduce, kMaxGroup)));
  const float inf = std::numeric_limits<float>::infinity();
  const int outer = static_cast<int>(r.outer), inner = static_cast<int>(r.inner);
  // Split: each slice of the reduced extent into scratch ([outer, slices, inner], already
  // divided), then the slices combined by a second launch that also applies the activation.
  if (slices > 1)
    SetArgs(l.kernel, in, ctx.scratch[0], outer, static_cast<int>(r.reduce), inner, r.divisor, lx,
            ly, slices, -inf, inf);
  else
    SetArgs(l.kernel, in, out, outer, static_cast<int>(r.reduce), inner, r.divisor, lx, ly, 1,
            r.act_lo, r.act_hi);
  l.dims = 2;
  l.global[0] = static_cast<size_t>(r.outer) * slices * RoundUp(static_cast<size_t>(r.inner), lx);
  l.global[1] = ly;
  l.local[0] = lx, l.local[1] = ly;
  launches->push_back(std::move(l));
  if (slices == 1) return "tiled";
  Launch l2;
  l2.name = "reduce_tiled";
  l2.kernel = CreateKernel(*prog, l2.name);
  const int ly2 = std::min(ly, CeilPow2(slices));
  SetArgs(l2.kernel, ctx.scratch[0], out, outer, slices, inner, 1.0f, lx, ly2, 1, r.act_lo,
          r.act_hi);
  l2.dims = 2;
  l2.global[0] = static_cast<size_t>(r.outer) * RoundUp(static_cast<size_t>(r.inner), lx);
  l2.global[1] = ly2;
  l2.local[0] = lx, l2.local[1] = ly2;
  launches->push_back(std::move(l2));
  return "tiled_split";
}

}  // namespace clgpu
