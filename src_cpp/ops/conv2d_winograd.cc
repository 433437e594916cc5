// Winograd F(2x2) (3x3 filters) and F(4x4) (3x3 to 9x9 as sums of 3x3 sub-filters), both stride 1:
// the filter transformed once, then per pass of tile rows an input transform, a batched GEMM
// per tile position and an output transform, through two scratch buffers (V and Mo).
#include <cstdint>

#include "ops/conv2d_algorithm.h"
#include "ops/tuning.h"

namespace clgpu {
namespace {

// Winograd variant: output tile size, positions per tile, kernel names.
struct WinogradKind {
  int tile, positions;
  const char* file;  // transforms
  const char* filter_transform;
  const char* input_transform;
  const char* output_transform;
};

const WinogradKind kF2 = {2,
                          16,
                          "conv2d_winograd",
                          "winograd_f2_filter_transform",
                          "winograd_f2_input_transform",
                          "winograd_f2_output_transform"};
const WinogradKind kF4 = {4,
                          36,
                          "conv2d_winograd4",
                          "winograd_f4_filter_transform",
                          "winograd_f4_input_transform",
                          "winograd_f4_output_transform"};

bool IsF4(ConvAlgorithm a) { return a == ConvAlgorithm::kWinograd4; }
const WinogradKind& Kind(ConvAlgorithm a) { return IsF4(a) ? kF4 : kF2; }
int Subs(ConvAlgorithm a, const ConvGeometry& g) { return IsF4(a) ? Winograd4Subs(g) : 1; }

// F(4x4) with half intermediates loses too much precision: its transformed
// buffers stay float under fp16 storage.
bool TransformedFloat(const OpContext& ctx, ConvAlgorithm a) {
  return IsF4(a) && ctx.storage_bytes == 2;
}
size_t TransformedBytes(const OpContext& ctx, ConvAlgorithm a) {
  return TransformedFloat(ctx, a) ? 4 : ctx.storage_bytes;
}
std::string WinogradDefines(const OpContext& ctx, ConvAlgorithm a) {
  return TransformedFloat(ctx, a) ? "-DTRANSFORMED_FLOAT" : "";
}

// The batched GEMM's tiles: by OC, and the table's "_wide" entry where its bigger tiles still
// give every compute unit two work-groups (high-resolution layers, e.g. PyNET-512's 64x64
// layers, whose 36 groups of 256 rows would leave most of a large GPU idle).
GemmTiles WinogradTiles(const ConvGeometry& g, const DeviceInfo& dev, ConvAlgorithm a) {
  const std::string name = g.oc <= 32    ? "winograd_gemm_thin"
                           : g.oc >= 128 ? "winograd_gemm_big"
                                         : "winograd_gemm";
  const long tiles = WinogradOutputTiles(g, a);
  const GemmTiles wide = TilesFor(name + "_wide", dev, name);
  if (Kind(a).positions * wide.Groups(tiles, g.oc) >= 2L * dev.compute_units) return wide;
  return TilesFor(name, dev);
}

// Tile rows per pass so V and Mo stay under the largest allowed buffer (and a
// share of device memory: scratch is not free).
int RowsPerPass(const OpContext& ctx, ConvAlgorithm a, const ConvGeometry& g) {
  const WinogradKind& k = Kind(a);
  const long th = (g.oh + k.tile - 1) / k.tile, tw = (g.ow + k.tile - 1) / k.tile;
  // The kernels index V and Mo with 32-bit ints: a pass stays under 2^31 elements.
  const size_t tb = TransformedBytes(ctx, a);
  const size_t cap = std::min<size_t>(
      {ctx.max_alloc, std::max<size_t>(64u << 20, ctx.env.device().global_mem_bytes / 16),
       size_t(INT32_MAX) * tb});
  const size_t per_row = size_t(k.positions) * g.n * tw * std::max(Subs(a, g) * g.c, g.oc) * tb;
  return static_cast<int>(std::clamp<long>(long(cap / std::max<size_t>(per_row, 1)), 1, th));
}

bool AppliesF2(const ConvGeometry& g) {
  return g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1;
}
bool AppliesF4(const ConvGeometry& g) {
  return g.kh >= 3 && g.kh <= 9 && g.kw >= 3 && g.kw <= 9 && g.sh == 1 && g.sw == 1 && g.dh == 1 &&
         g.dw == 1;
}

// The transformed U, or the OHWI upload it is made from if larger.
template <ConvAlgorithm A>
size_t WeightBytes(const OpContext& ctx, const ConvGeometry& g) {
  return std::max(OhwiBytes(ctx, g),
                  size_t(Kind(A).positions) * g.oc * Subs(A, g) * g.c * TransformedBytes(ctx, A));
}

// The filter is transformed once, on the device.
template <ConvAlgorithm A>
void PrepareWeights(OpContext& ctx, const ConvGeometry& g, const std::vector<float>& filter_ohwi,
                    ConvWeights* w) {
  const WinogradKind& k = Kind(A);
  Buffer ohwi = UploadWeights(ctx, filter_ohwi);
  const int subs = Subs(A, g);
  w->filter = ctx.env.CreateBuffer(
      size_t(k.positions) * g.oc * subs * g.c * TransformedBytes(ctx, A), CL_MEM_READ_WRITE);
  auto prog = ctx.GetProgram(k.file, WinogradDefines(ctx, A));
  Kernel kern = CreateKernel(*prog, k.filter_transform);
  if (IsF4(A)) {
    SetArgs(kern, ohwi.get(), w->filter.get(), g.c, g.oc, g.kh, g.kw);
  } else {
    SetArgs(kern, ohwi.get(), w->filter.get(), g.c, g.oc);
  }
  Run(ctx, kern, size_t(g.oc) * subs * g.c);
  CheckCl(Cl().clFinish(ctx.queue), "clFinish(filter transform)");
  w->plain = std::move(ohwi);  // the tiles computed directly (not all finite) read it
}

// V and Mo for one pass of tile rows.
template <ConvAlgorithm A>
std::vector<size_t> Scratch(const OpContext& ctx, const ConvGeometry& g) {
  const WinogradKind& k = Kind(A);
  const size_t rows = RowsPerPass(ctx, A, g);
  const size_t tw = (g.ow + k.tile - 1) / k.tile;
  const size_t p = size_t(g.n) * rows * tw, tb = TransformedBytes(ctx, A);
  return {size_t(k.positions) * p * Subs(A, g) * g.c * tb, size_t(k.positions) * p * g.oc * tb};
}

template <ConvAlgorithm A>
std::vector<Launch> Encode(OpContext& ctx, const ConvGeometry& g, cl_mem in, const ConvWeights& w,
                           cl_mem bias, cl_mem out, float act_min, float act_max, cl_mem residual,
                           cl_mem slopes) {
  if (ctx.scratch.size() < 2) throw Error("Winograd convolution without scratch buffers");
  std::vector<Launch> launches;
  const std::string rd = residual ? "-DHAS_RESIDUAL" : "";  // for the program that writes out
  const WinogradKind& k = Kind(A);
  const std::string wd = WinogradDefines(ctx, A);
  const GemmTiles t = WinogradTiles(g, ctx.env.device(), A);
  auto transforms = ctx.GetProgram(k.file, wd);
  auto outputs = residual ? ctx.GetProgram(k.file, With(wd, rd)) : transforms;
  auto gemm = ctx.GetProgram("winograd_gemm", With(wd, t.Defines()));
  const int th = (g.oh + k.tile - 1) / k.tile, tw = (g.ow + k.tile - 1) / k.tile;
  const int rows = RowsPerPass(ctx, A, g);
  const int ck = Subs(A, g) * g.c;  // the GEMM's reduction length
  for (int r0 = 0; r0 < th; r0 += rows) {
    const int nr = std::min(rows, th - r0);
    const int p = g.n * nr * tw;
    Launch li = Make1d(transforms, k.input_transform, size_t(p) * ck);
    if (IsF4(A)) {
      SetArgs(li.kernel, in, ctx.scratch[0], g.n, g.h, g.w, g.c, g.oh, g.ow, g.pad_top, g.pad_left,
              r0, nr, g.kh, g.kw);
    } else {
      SetArgs(li.kernel, in, ctx.scratch[0], g.n, g.h, g.w, g.c, g.oh, g.ow, g.pad_top, g.pad_left,
              r0, nr);
    }
    Launch lg = Make1d(gemm, "winograd_gemm", t.Global(p, g.oc), t.work_group());
    lg.dims = 2;
    lg.global[1] = k.positions;
    lg.local[1] = 1;
    SetArgs(lg.kernel, ctx.scratch[0], w.filter.get(), ctx.scratch[1], p, g.oc, ck);
    Launch lo = Make1d(outputs, k.output_transform, size_t(p) * g.oc);
    SetArgsAndOptionals(lo.kernel, {residual, slopes}, ctx.scratch[1], bias, out, g.n, g.oh, g.ow,
                        g.oc, r0, nr, act_min, act_max, in, w.plain.get(), g.h, g.w, g.c, g.kh,
                        g.kw, g.pad_top, g.pad_left);
    launches.push_back(std::move(li));
    launches.push_back(std::move(lg));
    launches.push_back(std::move(lo));
  }
  return launches;
}

}  // namespace

long WinogradOutputTiles(const ConvGeometry& g, ConvAlgorithm a) {
  const int tile = Kind(a).tile;
  return long(g.n) * ((g.oh + tile - 1) / tile) * ((g.ow + tile - 1) / tile);
}

long WinogradGemmGroups(const ConvGeometry& g, const DeviceInfo& dev, ConvAlgorithm a) {
  return Kind(a).positions * WinogradTiles(g, dev, a).Groups(WinogradOutputTiles(g, a), g.oc);
}

// Input transform, batched GEMM, output transform per pass of tile rows; counted as one pass
// (more only past RowsPerPass's cap, where the arithmetic outweighs the launches).
LaunchCount Launches(const DeviceInfo&, const ConvGeometry&) { return {3}; }

constexpr ConvAlgorithm kF2Id = ConvAlgorithm::kWinograd, kF4Id = ConvAlgorithm::kWinograd4;

extern const ConvAlgorithmDef kConvWinograd = {
    kF2Id,          "winograd",    AppliesF2, WeightBytes<kF2Id>, PrepareWeights<kF2Id>,
    Scratch<kF2Id>, Encode<kF2Id>, Launches};
extern const ConvAlgorithmDef kConvWinograd4 = {
    kF4Id,          "winograd4",   AppliesF4, WeightBytes<kF4Id>, PrepareWeights<kF4Id>,
    Scratch<kF4Id>, Encode<kF4Id>, Launches};

}  // namespace clgpu
