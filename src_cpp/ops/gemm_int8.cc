#include "ops/gemm_int8.h"

#include <climits>
#include <cstdio>
#include <cstdlib>

#include "cl/int8_dot.h"
#include "common/error.h"

namespace clgpu {
namespace {

struct Int8Tiles {
  int tm, tn, tk4, wm, wn;
  size_t work_group() const { return size_t(tm / wm) * (tn / wn); }
};

// Per device class; CLGPU_TUNE_GEMM_INT8="TM,TN,TK4,WM,WN" overrides (bench/bench_int8.py).
Int8Tiles TilesFor(const DeviceInfo& dev) {
  Int8Tiles t = dev.type == "gpu" && dev.nvidia() ? Int8Tiles{64, 64, 8, 8, 4}
                                                  : Int8Tiles{32, 32, 4, 4, 4};
  if (const char* env = std::getenv("CLGPU_TUNE_GEMM_INT8")) {
    Int8Tiles o{};
    if (std::sscanf(env, "%d,%d,%d,%d,%d", &o.tm, &o.tn, &o.tk4, &o.wm, &o.wn) != 5 ||
        o.wm < 1 || o.wn < 1 || o.tk4 < 1 || o.tm % o.wm || o.tn % o.wn || o.tm > 256 ||
        o.tn > 256)
      throw Error(std::string("CLGPU_TUNE_GEMM_INT8 must be TM,TN,TK4,WM,WN, not '") + env + "'");
    t = o;
  }
  return t;
}

}  // namespace

const std::string& Int8DotPathOf(const OpContext& ctx) { return Int8DotPath(ctx.env.device()); }

Int8GemmWeights PrepareInt8Gemm(OpContext& ctx, const std::vector<int8_t>& b, int n, int k,
                                const std::vector<int32_t>& bias, int a_zero,
                                const OutputStage& stage) {
  Int8GemmWeights w;
  w.n = n, w.k = k, w.kp = (k + 3) / 4 * 4;
  std::vector<int8_t> packed(size_t(n) * w.kp, 0);
  std::vector<int32_t> folded(n);
  for (int r = 0; r < n; ++r) {
    int64_t sum = 0;
    for (int c = 0; c < k; ++c) {
      const int8_t v = b[size_t(r) * k + c];
      packed[size_t(r) * w.kp + c] = v;
      sum += v;
    }
    const int64_t f = (bias.empty() ? 0 : int64_t(bias[r])) - int64_t(a_zero) * sum;
    if (f < INT_MIN || f > INT_MAX) throw Error("int8 GEMM: a folded bias leaves int32");
    folded[r] = static_cast<int32_t>(f);
  }
  w.b = UploadBytes(ctx, packed.data(), packed.size());
  w.bias = UploadBytes(ctx, folded.data(), folded.size() * 4);
  w.stage = UploadOutputStage(ctx, stage);
  return w;
}

std::vector<Launch> EncodeInt8Gemm(OpContext& ctx, const Int8GemmWeights& w, cl_mem a, cl_mem out,
                                   int m, int a_zero, const OutputStage& s,
                                   const ConvGeometry* g) {
  const Int8Tiles t = TilesFor(ctx.env.device());
  char tiles[96];
  std::snprintf(tiles, sizeof tiles, "-DTM=%d -DTN=%d -DTK4=%d -DWM=%d -DWN=%d", t.tm, t.tn, t.tk4,
                t.wm, t.wn);
  std::string defines = tiles;
  const bool vec = g ? g->c % 4 == 0 : w.k % 4 == 0;
  if (g) defines += " -DIM2COL";
  if (vec) defines += " -DVEC_A";
  const std::string dot = Int8DotDefines(Int8DotPathOf(ctx));
  if (!dot.empty()) defines += " " + dot;
  Launch l;
  l.name = g ? "gemm_int8_im2col" : "gemm_int8";
  l.kernel = CreateKernel(*ctx.GetProgram("gemm_int8", defines), "gemm_int8");
  ConvGeometry none;
  const ConvGeometry& c = g ? *g : none;
  SetArgs(l.kernel, a, w.b.get(), w.bias.get(), w.stage.get(), out, m, w.n, w.k, w.kp, a_zero,
          s.up_below, s.zero_point, s.act_min, s.act_max, c.h, c.w, c.c, c.ow, c.oh, c.kw, c.sh,
          c.sw, c.dh, c.dw, c.pad_top, c.pad_left);
  const long groups = long((m + t.tm - 1) / t.tm) * ((w.n + t.tn - 1) / t.tn);
  l.dims = 1;
  l.global[0] = size_t(groups) * t.work_group();
  l.local[0] = t.work_group();
  std::vector<Launch> launches;
  launches.push_back(std::move(l));
  return launches;
}

}  // namespace clgpu
