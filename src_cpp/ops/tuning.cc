#include "ops/tuning.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/env.h"
#include "common/error.h"

namespace clgpu {
namespace {
// The rows of src_cpp/ops/tuning.json, where the tuners write their winners (generated into
// TuningRows by cmake/ClgpuTuning.cmake). A row's `device` is a key of
// DeviceProfile::tuning_keys: a device takes the row of its most specific key that has one,
// "<vendor>/<architecture>/<name>", "<vendor>/<architecture>", "<vendor>", then "gpu" (any GPU)
// or "cpu" (any other device).
//
// GEMM tiles (TM, TN, TK, WM, WN, DBUF, TMAP, LPAD). NVIDIA's were tuned on an H200
// (bench/tune_gemm.py, bench/bench_conv2d.py; figures in bench/results/gemm-*.md and conv2d-*.md):
// 256x128 tiles of 16x8 per work-item, double-buffered local memory and LPAD 4; for the Winograd
// GEMMs 128x128 at OC >= 128, 128x64 at OC = 64 and 256x32 at OC <= 32. The "_wide" Winograd
// entries (twice the rows, LPAD 4) serve layers with work-groups to spare (WinogradTiles): faster
// on the conv set's high-resolution layers, but on PyNET-512's 64x64 layers they left units idle.
// "igemm_dw_small" (64 x 64): a folded depthwise's GEMM on maps where igemm_big's 128 rows make
// fewer groups than the device has units: on the H200 float DS-CNNs of 64 channels ran 1.08-1.29x
// faster (their four splits then pay as one launch), 96-172 channels within noise, the real
// models 0.92-1.05x of their time before (bench/results/ab-options-dwsmall-NVIDIA_H200.md;
// -dwtiles- has 32 x 32 and 64 x 32, which compute the depthwise for twice the columns: up to
// 1.4x slower on larger maps).
// Other GPUs start from the same shapes, without "_wide" entries (TilesFor falls back to the
// narrow ones); CPU devices want small groups. "gemm_int8" (TM, TN, TK4 groups of four k, WM, WN):
// on NVIDIA GPUs 32 x 32 tiles of 256 work-items, 2 x 2 outputs each, 32 k per step: batch-1
// layers are too small to hide memory latency with work per work-item, so many work-items of
// little work each ran the int8 models faster on the H200 than 4 x 4 outputs per work-item and
// 64 x 64 tiles (docs/int8.md has the figures). "gemm_int8_dw" (a depthwise folded in as A, a
// fallback to "gemm_int8"; only where K is too short to fill the device in steps of 32): steps
// of 8 k split the fused kernels' K finer, which cut their time at batch 1 on an H100
// (bench/results/kernel-profile-keyword_spotting_mobilenetv2-NVIDIA_H100_80GB_HBM3.md).
//
// Untested starting points, written from the vendors' published limits (no such device was at
// hand): AMD (RDNA / CDNA) has 64 KB of LDS per compute unit and 256-wide groups, which hold the
// generic GPU tiles, so "amd" has no rows of its own. Intel (Xe, Gen): 64 KB of shared local
// memory per sub-slice, groups of up to 256 on older parts: the generic tiles without the
// double-buffered 256 x 128 one. Arm Mali: local memory is ordinary cached memory and a thread
// keeps full occupancy only with few registers: 64 x 64 tiles of 4 x 4 outputs (256 work-items),
// no double buffering. Qualcomm Adreno: 32 KB of local memory on most parts and register files
// sized for 4 x 4 blocks: as Mali, with the Winograd GEMMs' tiles halved.
//
// direct_blocked (PX, OCB, WGX, WGY). NVIDIA: measured on an H200 (bench/tune_direct_blocked.py,
// full-size conv-set shapes): 8 pixels x 16 channels per work-item in 16 x 8 groups was best or
// within 3% on six of the seven shapes, OC = 3 included (OCB is capped by OC). Other GPUs start
// from it. CPU devices: small blocks (PoCL runs a group's work-items in a loop).
//
// winograd4_fused (TP, OCB, CC, RT, RO, U_LOCAL, PS). NVIDIA: 16 tiles x 32 channels per group
// (8 tiles from OC = 32 on: 16 x 32 positions to exchange need 72 KB of local memory, NVIDIA
// allows 48), 8 x 2 per work-item with the positions split over 6 work-items (96 accumulators
// each, 96 work-items per group), chunks of 8, U read through the cache: of 30 blockings swept on
// an H200 (CLGPU_TUNE_WINOGRAD4_FUSED) the best or within 3 % on the fused kernel's layers; other
// splits and blocks were slower (bench/results/conv2d-*.md). Other GPUs: the staged start,
// unsplit. CPU devices: small groups, one tile x one channel per work-item (PoCL runs a group's
// work-items in a loop and compiles the 2 x 2 block far more slowly).

// The row of table `table` and entry `name` under the device's most specific key, or null;
// a row of fewer than `min_values` values is an error in the JSON.
const TuningRow* Find(const char* table, const std::string& name, const DeviceInfo& dev,
                      int min_values) {
  size_t n = 0;
  const TuningRow* rows = TuningRows(&n);
  for (const std::string& key : dev.profile.tuning_keys)
    for (size_t i = 0; i < n; ++i) {
      const TuningRow& r = rows[i];
      if (key != r.device || name != r.name || std::strcmp(table, r.table)) continue;
      if (r.count < min_values)
        throw Error(std::string("src_cpp/ops/tuning.json: ") + table + "/" + key + "/" + name +
                    " has " + std::to_string(r.count) + " values, needs at least " +
                    std::to_string(min_values));
      return &r;
    }
  return nullptr;
}

std::optional<std::string> TuneOverride(const std::string& name, std::string* env_name) {
  *env_name = "CLGPU_TUNE_" + name;
  for (char& c : *env_name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return GetEnv(env_name->c_str());
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
  if (const auto value = TuneOverride(name, &env_name)) {
    const char* v = value->c_str();
    GemmTiles t{};
    const int n = std::sscanf(v, "%d,%d,%d,%d,%d,%d,%d,%d", &t.tile_m, &t.tile_n, &t.tile_k,
                              &t.wpt_m, &t.wpt_n, &t.dbuf, &t.tmap, &t.lpad);
    if (n == 5 || n == 7 || n == 8) return t;
  }
  if (const TuningRow* r = Find("gemm", name, dev, 5)) {
    const int* v = r->values;
    return {v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]};
  }
  if (!fallback.empty()) return TilesFor(fallback, dev);
  return {32, 32, 16, 4, 4};
}

BlockedTiles BlockedTilesFor(const std::string& name, const DeviceInfo& dev) {
  std::string env_name;
  if (const auto value = TuneOverride(name, &env_name)) {
    const char* v = value->c_str();
    BlockedTiles t{};
    char tail = 0;
    // A sweep must not time a configuration other than the one it names: refuse, do not fall back.
    if (std::sscanf(v, "%d,%d,%d,%d%c", &t.px, &t.ocb, &t.wgx, &t.wgy, &tail) != 4 || t.px < 1 ||
        t.px > 64 || t.ocb < 1 || t.ocb > 64 || t.wgx < 1 || t.wgy < 1)
      throw Error(env_name + "='" + v + "': expected PX,OCB,WGX,WGY with 1 <= PX, OCB <= 64");
    return t;
  }
  if (const TuningRow* r = Find("direct_blocked", name, dev, 4)) {
    const int* v = r->values;
    return {v[0], v[1], v[2], v[3]};
  }
  return {4, 8, 8, 2};
}

WinogradFusedTiles WinogradFusedTilesFor(const std::string& name, const DeviceInfo& dev) {
  std::string env_name;
  if (const auto value = TuneOverride(name, &env_name)) {
    const char* v = value->c_str();
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
  if (const TuningRow* r = Find("winograd4_fused", name, dev, 5)) {
    const int* v = r->values;
    // U_LOCAL and PS default to 1 when a row leaves them out.
    return {v[0], v[1], v[2], v[3], v[4], r->count > 5 ? v[5] : 1, r->count > 6 ? v[6] : 1};
  }
  return {8, 8, 4, 1, 1, 1, 1};
}

}  // namespace clgpu
