// Per-device defaults of the kernels' tunables (the -D defines), in one table generated from
// src_cpp/ops/tuning.json.
// A tuner (or a user) overrides an entry with
// CLGPU_TUNE_<NAME>="TM,TN,TK,WM,WN[,DBUF,TMAP[,LPAD]]" (GEMM tiles), "PX,OCB,WGX,WGY"
// (the blocked direct convolution) or "TP,OCB,CC,RT,RO[,U_LOCAL]" (the fused Winograd F(4x4)).
#pragma once

#include <cstddef>
#include <string>

#include "cl/device.h"

namespace clgpu {

// One row of the tuning table (src_cpp/ops/tuning.json): table ("gemm", "direct_blocked",
// "winograd4_fused"), device key (DeviceProfile::tuning_keys), entry name, and its first `count`
// values in the table's field order (the rest 0).
struct TuningRow {
  const char* table;
  const char* device;
  const char* name;
  int values[8];
  int count;
};

// Every row, generated from the JSON at build time (cmake/ClgpuTuning.cmake).
const TuningRow* TuningRows(size_t* count);

// Tiles of the local-memory GEMM family (gemm.cl, conv2d_implicit_gemm.cl, winograd_gemm).
struct GemmTiles {
  int tile_m, tile_n, tile_k, wpt_m, wpt_n;
  int dbuf = 0;  // GEMM_DBUF: double-buffered local tiles (gemm_tiles.cl)
  int tmap = 0;  // GEMM_TMAP: order of the tile moves (gemm_tiles.cl)
  int lpad = 0;  // LPAD: local-row padding (bank conflicts of the transposed stores)
  size_t work_group() const { return size_t(tile_m / wpt_m) * (tile_n / wpt_n); }
  std::string Defines() const;
  // Output tiles (work-groups) of an M x N output, and the 1-D global size that runs them.
  long Groups(long m, long n) const {
    return ((m + tile_m - 1) / tile_m) * ((n + tile_n - 1) / tile_n);
  }
  size_t Global(long m, long n) const { return size_t(Groups(m, n)) * work_group(); }
};

// Entries: "gemm_big" (GEMMs of at least two waves of its tiles), "gemm", "gemm_small" (M <= 256),
// "igemm", "igemm_big" (C, OC >= 64), "igemm_dw_small" (a folded depthwise's GEMM where igemm_big
// makes fewer groups than compute units; igemm_big where a device has no row), "igemm_thin"
// (C <= 8), "winograd_gemm", "winograd_gemm_big" (GEMM K, OC >= 256), "winograd_gemm_thin"
// (OC <= 32), and the three Winograd ones + "_wide";
// "batch_matmul", "batch_matmul_small" (BATCH_MATMUL with too few tiles to fill the device).
// Without an override or an entry for the device's class, `fallback`'s tiles when it is given
// (a variant measured on some devices only), else a generic 32 x 32.
GemmTiles TilesFor(const std::string& name, const DeviceInfo& dev,
                   const std::string& fallback = "");

// Register blocking of the blocked direct convolution (conv2d_blocked.cl): PX output pixels along
// W times OCB output channels per work-item, WGX x WGY work-items per group.
struct BlockedTiles {
  int px, ocb, wgx, wgy;
};

// Entries: "direct_blocked", "direct_blocked_thin" (OC <= 4). An override that is not four
// integers with PX and OCB in 1..64 and WGX, WGY >= 1 throws Error.
BlockedTiles BlockedTilesFor(const std::string& name, const DeviceInfo& dev);

// Blocking of the fused Winograd F(4x4) convolution (conv2d_winograd4_fused.cl): TP output tiles x
// OCB output channels per work-group, RT tiles x RO channels per work-item, CC reduction values
// per chunk, U_LOCAL: the filter chunk staged in local memory, PS: work-items sharing the 36
// positions of one block (36 / PS * RT * RO float accumulators each).
struct WinogradFusedTiles {
  int tp, ocb, cc, rt, ro, u_local, ps;
  size_t Group() const { return size_t(ps) * (tp / rt) * (ocb / ro); }
};

// Entry "winograd4_fused". An override that is not five to seven integers with 1 <= TP, OCB <=
// 256, 1 <= CC <= 64, 1 <= RT, RO <= 8, TP % RT == 0, OCB % RO == 0, U_LOCAL 0 or 1 and PS a
// divisor of 36 throws Error.
WinogradFusedTiles WinogradFusedTilesFor(const std::string& name, const DeviceInfo& dev);

}  // namespace clgpu
