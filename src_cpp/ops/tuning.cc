#include "ops/tuning.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "common/error.h"

namespace clgpu {
namespace {

// `device`: a key of DeviceProfile::tuning_keys. A device takes the entry of its most specific
// key that has one: "<vendor>/<architecture>/<name>", "<vendor>/<architecture>", "<vendor>",
// then "gpu" (any GPU) or "cpu" (any other device).
struct Entry {
  const char* device;
  const char* name;
  GemmTiles tiles;
};

// NVIDIA entries were tuned on an H200 (bench/tune_gemm.py, bench/bench_conv2d.py; figures in
// bench/results/gemm-*.md and conv2d-*.md; fields: TM, TN, TK, WM, WN, DBUF, TMAP, LPAD):
// 256x128 tiles of 16x8 per work-item, double-buffered local memory and LPAD 4; for the
// Winograd GEMMs 128x128 at OC >= 128, 128x64 at OC = 64 and 256x32 at OC <= 32. The "_wide"
// Winograd entries (twice the rows, LPAD 4) serve layers with work-groups to spare
// (WinogradTiles): faster on the conv set's high-resolution layers, but on PyNET-512's 64x64
// layers they left units idle.
// Other GPUs start from the same shapes, without "_wide" entries (TilesFor falls back to the
// narrow ones); CPU devices want small groups.
// "gemm_int8" (gemm_int8.cl: TM, TN, TK4 groups of four k, WM, WN): on NVIDIA GPUs 32 x 32 tiles
// of 256 work-items, 2 x 2 outputs each, 32 k per step: batch-1 layers are too small to hide
// memory latency with work per work-item, so many work-items of little work each ran the int8
// models faster on the H200 than 4 x 4 outputs per work-item and 64 x 64 tiles
// (bench/results/int8-tiles-*.md).
//
// Untested starting points, documented rather than measured (no such device was at hand):
// - AMD (RDNA / CDNA): 64 KB of LDS per compute unit and 256-wide groups hold the generic GPU
//   tiles, so "amd" has no rows of its own and reads "gpu".
// - Intel (Xe, Gen): 64 KB of shared local memory per sub-slice, groups of up to 256 on older
//   parts: the generic GPU tiles, without the double-buffered 256 x 128 one.
// - Arm Mali: local memory is ordinary cached memory and a thread keeps full occupancy only with
//   few registers: 64 x 64 tiles of 4 x 4 outputs (256 work-items), no double buffering.
// - Qualcomm Adreno: 32 KB of local memory on most parts and register files sized for 4 x 4
//   blocks: as Mali, with the Winograd GEMMs' tiles halved.
const Entry kTable[] = {
    {"nvidia", "gemm_big", {256, 128, 16, 16, 8, 1, 0, 4}},
    {"nvidia", "gemm", {128, 128, 16, 8, 8, 0, 0, 4}},
    {"nvidia", "gemm_small", {64, 64, 16, 4, 4}},
    {"nvidia", "igemm", {32, 32, 16, 4, 4}},
    {"nvidia", "igemm_big", {128, 64, 16, 8, 4, 1}},
    {"nvidia", "igemm_thin", {64, 32, 8, 4, 4}},
    {"nvidia", "winograd_gemm", {128, 64, 16, 8, 4}},
    {"nvidia", "winograd_gemm_big", {128, 128, 16, 8, 8, 1}},
    {"nvidia", "winograd_gemm_thin", {256, 32, 16, 8, 4}},
    {"nvidia", "winograd_gemm_wide", {256, 64, 16, 8, 8, 0, 0, 4}},
    {"nvidia", "winograd_gemm_big_wide", {256, 128, 16, 16, 8, 1, 0, 4}},
    {"nvidia", "winograd_gemm_thin_wide", {512, 32, 16, 16, 4, 0, 0, 4}},
    {"nvidia", "batch_matmul", {64, 64, 16, 4, 4}},
    {"nvidia", "batch_matmul_small", {32, 32, 16, 4, 4}},
    {"nvidia", "gemm_int8", {32, 32, 8, 2, 2}},
    {"gpu", "gemm_big", {128, 128, 16, 8, 8, 1, 0, 4}},
    {"gpu", "gemm", {128, 64, 16, 8, 4}},
    {"gpu", "gemm_small", {64, 64, 16, 4, 4}},
    {"gpu", "igemm", {32, 32, 16, 4, 4}},
    {"gpu", "igemm_big", {128, 64, 16, 8, 4}},
    {"gpu", "igemm_thin", {64, 32, 8, 4, 4}},
    {"gpu", "winograd_gemm", {128, 64, 16, 8, 4}},
    {"gpu", "winograd_gemm_big", {128, 64, 16, 8, 4}},
    {"gpu", "winograd_gemm_thin", {128, 32, 16, 4, 4}},
    {"gpu", "batch_matmul", {64, 64, 16, 4, 4}},
    {"gpu", "batch_matmul_small", {32, 32, 16, 4, 4}},
    {"gpu", "gemm_int8", {32, 32, 4, 4, 4}},
    {"intel", "gemm_big", {128, 128, 16, 8, 8}},
    {"arm", "gemm_big", {64, 64, 16, 4, 4}},
    {"arm", "gemm", {64, 64, 16, 4, 4}},
    {"arm", "gemm_small", {32, 32, 16, 4, 4}},
    {"arm", "igemm_big", {64, 64, 16, 4, 4}},
    {"arm", "winograd_gemm", {64, 64, 16, 4, 4}},
    {"arm", "winograd_gemm_big", {64, 64, 16, 4, 4}},
    {"arm", "winograd_gemm_thin", {64, 32, 16, 4, 4}},
    {"qualcomm", "gemm_big", {64, 64, 16, 4, 4}},
    {"qualcomm", "gemm", {64, 64, 16, 4, 4}},
    {"qualcomm", "gemm_small", {32, 32, 16, 4, 4}},
    {"qualcomm", "igemm_big", {64, 64, 16, 4, 4}},
    {"qualcomm", "winograd_gemm", {64, 32, 16, 4, 4}},
    {"qualcomm", "winograd_gemm_big", {64, 32, 16, 4, 4}},
    {"qualcomm", "winograd_gemm_thin", {32, 32, 16, 4, 4}},
    {"cpu", "gemm_big", {32, 32, 16, 4, 4}},
    {"cpu", "gemm", {32, 32, 16, 4, 4}},
    {"cpu", "gemm_small", {32, 32, 16, 4, 4}},
    {"cpu", "igemm", {32, 32, 16, 4, 4}},
    {"cpu", "igemm_big", {32, 32, 16, 4, 4}},
    {"cpu", "igemm_thin", {32, 32, 8, 4, 4}},
    {"cpu", "winograd_gemm", {32, 32, 16, 4, 4}},
    {"cpu", "winograd_gemm_big", {32, 32, 16, 4, 4}},
    {"cpu", "winograd_gemm_thin", {32, 32, 16, 4, 4}},
    {"cpu", "batch_matmul", {32, 32, 16, 4, 4}},
    {"cpu", "batch_matmul_small", {32, 32, 16, 4, 4}},
    {"cpu", "gemm_int8", {32, 32, 4, 4, 4}},
};

struct BlockedEntry {
  const char* device;
  const char* name;
  BlockedTiles tiles;
};

// PX, OCB, WGX, WGY. NVIDIA: measured on an H200 (bench/tune_direct_blocked.py, full-size
// conv-set shapes): 8 pixels x 16 channels per work-item in 16 x 8 groups was best or within
// 3% on six of the seven shapes, OC = 3 included (OCB is capped by OC). Other GPUs start from
// it. CPU devices: small blocks (PoCL runs a group's work-items in a loop).
const BlockedEntry kBlockedTable[] = {
    {"nvidia", "direct_blocked", {8, 16, 16, 8}}, {"nvidia", "direct_blocked_thin", {8, 16, 16, 8}},
    {"gpu", "direct_blocked", {8, 16, 16, 8}},    {"gpu", "direct_blocked_thin", {8, 16, 16, 8}},
    {"cpu", "direct_blocked", {4, 8, 8, 2}},      {"cpu", "direct_blocked_thin", {4, 4, 8, 2}},
};

struct FusedEntry {
  const char* device;
  const char* name;
  WinogradFusedTiles tiles;
};

// TP, OCB, CC, RT, RO, U_LOCAL, PS of conv2d_winograd4_fused.cl. NVIDIA: 16 tiles x 32 channels
// per group (8 tiles from OC = 32 on: 16 x 32 positions to exchange need 72 KB of local memory,
// NVIDIA allows 48), 8 x 2 per work-item with the positions split over 6 work-items (96
// accumulators each, 96 work-items per group), chunks of 8, U read through the cache: of 30
// blockings swept on an H200 (CLGPU_TUNE_WINOGRAD4_FUSED) the best or within 3 % on the fused
// kernel's layers; other splits and blocks were slower (bench/results/conv2d-*.md). Other GPUs:
// the staged start, unsplit. CPU devices: small groups, one tile x one channel per work-item
// (PoCL runs a group's work-items in a loop and compiles the 2 x 2 block far more slowly).
const FusedEntry kFusedTable[] = {
    {"nvidia", "winograd4_fused", {16, 32, 8, 8, 2, 0, 6}},
    {"gpu", "winograd4_fused", {16, 32, 4, 2, 2, 1, 1}},
    {"cpu", "winograd4_fused", {8, 8, 4, 1, 1, 1, 1}},
};

// The entry of `name` under the device's most specific key that has one, or null.
template <typename E, size_t N>
const E* Find(const E (&table)[N], const std::string& name, const DeviceInfo& dev) {
  for (const std::string& key : dev.profile.tuning_keys)
    for (const E& e : table)
      if (key == e.device && name == e.name) return &e;
  return nullptr;
}

const char* TuneOverride(const std::string& name, std::string* env_name) {
  *env_name = "CLGPU_TUNE_" + name;
  for (char& c : *env_name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return std::getenv(env_name->c_str());
}

}  // namespace

std::string GemmTiles::Defines() const {
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "-DTILE_M=%d -DTILE_N=%d -DTILE_K=%d -DWPT_M=%d -DWPT_N=%d -DGEMM_DBUF=%d "
                "-DGEMM_TMAP=%d -DLPAD=%d",
                tile_m, tile_n, tile_k, wpt_m, wpt_n, dbuf, tmap, lpad);
  return buf;
}

GemmTiles TilesFor(const std::string& name, const DeviceInfo& dev, const std::string& fallback) {
  std::string env_name;
  if (const char* v = TuneOverride(name, &env_name)) {
    GemmTiles t{};
    const int n = std::sscanf(v, "%d,%d,%d,%d,%d,%d,%d,%d", &t.tile_m, &t.tile_n, &t.tile_k,
                              &t.wpt_m, &t.wpt_n, &t.dbuf, &t.tmap, &t.lpad);
    if (n == 5 || n == 7 || n == 8) return t;
  }
  if (const Entry* e = Find(kTable, name, dev)) return e->tiles;
  if (!fallback.empty()) return TilesFor(fallback, dev);
  return {32, 32, 16, 4, 4};
}

BlockedTiles BlockedTilesFor(const std::string& name, const DeviceInfo& dev) {
  std::string env_name;
  if (const char* v = TuneOverride(name, &env_name)) {
    BlockedTiles t{};
    char tail = 0;
    // A sweep must not time a configuration other than the one it names: refuse, do not fall back.
    if (std::sscanf(v, "%d,%d,%d,%d%c", &t.px, &t.ocb, &t.wgx, &t.wgy, &tail) != 4 || t.px < 1 ||
        t.px > 64 || t.ocb < 1 || t.ocb > 64 || t.wgx < 1 || t.wgy < 1)
      throw Error(env_name + "='" + v + "': expected PX,OCB,WGX,WGY with 1 <= PX, OCB <= 64");
    return t;
  }
  if (const BlockedEntry* e = Find(kBlockedTable, name, dev)) return e->tiles;
  return {4, 8, 8, 2};
}

WinogradFusedTiles WinogradFusedTilesFor(const std::string& name, const DeviceInfo& dev) {
  std::string env_name;
  if (const char* v = TuneOverride(name, &env_name)) {
    WinogradFusedTiles t{0, 0, 0, 0, 0, 1, 1};
    char tail = 0;
    const int n = std::sscanf(v, "%d,%d,%d,%d,%d,%d,%d%c", &t.tp, &t.ocb, &t.cc, &t.rt, &t.ro,
                              &t.u_local, &t.ps, &tail);
    // Like the blocked table: a sweep must not time a configuration other than the one it names.
    if (n < 5 || n > 7 || t.tp < 1 || t.tp > 256 || t.ocb < 1 || t.ocb > 256 || t.cc < 1 ||
        t.cc > 64 || t.rt < 1 || t.rt > 8 || t.ro < 1 || t.ro > 8 || t.tp % t.rt || t.ocb % t.ro ||
        (t.u_local != 0 && t.u_local != 1) || t.ps < 1 || 36 % t.ps)
      throw Error(env_name + "='" + v +
                  "': expected TP,OCB,CC,RT,RO[,U_LOCAL[,PS]] with 1 <= TP, OCB <= 256, 1 <= CC "
                  "<= 64, 1 <= RT, RO <= 8, TP a multiple of RT, OCB a multiple of RO, U_LOCAL 0 "
                  "or 1, PS a divisor of 36");
    return t;
  }
  if (const FusedEntry* e = Find(kFusedTable, name, dev)) return e->tiles;
  return {8, 8, 4, 1, 1, 1, 1};
}

}  // namespace clgpu
