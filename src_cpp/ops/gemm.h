// The GEMM behind FULLY_CONNECTED and 1x1 convolutions: C[M,N] = act(A[M,K] B[N,K]^T + bias),
// as one tiled kernel, or split along K when the output has too few tiles to fill the device.
#pragma once

#include <string>
#include <vector>

#include "ops/op.h"
#include "ops/tuning.h"

namespace clgpu {

struct GemmPlan {
  GemmTiles tiles;
  int splits = 1;  // > 1: gemm_nt_splitk + gemm_splitk_reduce
  int k_per_split = 0;
  // M <= kGemvMaxM: gemm_nt_small_m, which reads B once, coalesced along K (batch-1 FC, the
  // 1x1 convs on a 1x1 map of squeeze-excite blocks); a tile of rows would be mostly idle.
  bool small_m = false;
};

constexpr int kGemvMaxM = 8;  // SM_MAX_M of kernels/gemm.cl

// Splits of K for `groups` output tiles with these tiles: on a GPU, when the tiles alone
// would leave compute units idle. forced_splits > 0 (option gemm_splits, a test hook)
// fixes their number. Shared by the plain and the implicit GEMM, and the int8 GEMM, each with
// its target of resident work-items per compute unit (CLGPU_SPLITK_THREADS overrides it).
// A split keeps at least `min_tiles` tiles of K (4; fewer where a tile carries more work than
// its multiply-adds).
void PlanSplitK(GemmPlan& p, const DeviceInfo& dev, long groups, long k, int forced_splits,
                long work_items = 2048, long min_tiles = 4);

// Whether a split convolution of `splits` splits also offers the form where the last split of
// each tile adds the splits and stores the output in the split kernel itself
// (kernels/conv2d_implicit_gemm_splitk.cl): one launch where the other form has the split kernel
// and gemm_splitk_reduce (LaunchForm; the partition measures which runs faster). Its last group
// reads the partial sums a batch of splits per round trip to L2, which many splits lengthen: up to
// the device profile's split_k_last_max splits, where inline PTX runs (PtxDefines: the fence and
// loads those reads rely on); $CLGPU_SPLITK_LAST_MAX sets the most instead, anywhere (tests,
// A/B; 0: never).
bool SplitKLastOffered(const DeviceInfo& dev, int splits);
// What that form adds to plan p's split kernel for the cost model (us; the device profile's
// split_k_last_us and _ns_per_sum, or $CLGPU_SPLITK_LAST_US "US,NS_PER_SUM"), or < 0 where it is
// not offered or has no figures.
double SplitKLastUs(const DeviceInfo& dev, const GemmPlan& p);
// The launches of a split convolution's plan p (ops/split_k_forms.h) as the cost model counts
// them: the split kernel and its reduce, with what their one-launch form adds.
LaunchCount SplitLaunchCount(const DeviceInfo& dev, const GemmPlan& p);

// Per-channel MUL and ADD nodes between a convolution and its input (fusion/affine.cc), applied
// where the GEMMs load each element of A (kernels/gemm_affine.cl's A_AFFINE):
// x -> clamp(clamp(x * scale, lo1, hi1) + shift, lo2, hi2). scale, shift: [C] in the float
// storage, null when that node is absent.
struct AffineA {
  cl_mem scale = nullptr, shift = nullptr;
  float lo1 = 0, hi1 = 0, lo2 = 0, hi2 = 0;
  bool scale_one = false, shift_one = false;  // one value for every channel
};
// The program defines of `affine` ("" for none).
std::string AffineDefines(const AffineA* affine);

// forced_splits > 0 (option gemm_splits, a test hook) fixes the number of K splits.
GemmPlan PlanGemm(const DeviceInfo& dev, long m, long n, long k, int forced_splits = 0);

// Scratch bytes (slot 0) the plan needs (partial sums of the splits).
size_t GemmScratchBytes(const GemmPlan& p, long m, long n);

// residual (optional): C = act(A B^T + bias + residual), residual laid out like C; under
// split-K the reduce adds it. b_max_abs: the largest |B| when the caller knows it (constant
// weights), else negative; the small-M kernel's overflow guard takes it as its bound
// (kernels/gemm_small_m.cl) or, unknown, finds it while it reads B.
// The launches' algorithm name for profiles: "gemv", "gemm" or "gemm_splitk".
const char* GemmAlgorithm(const GemmPlan& p);
// slopes (optional): a PRELU of a slope per column after the activation (kernels/common.cl's
// CHANNEL_SLOPES, the program built with it). kscale
// (optional; not with the small-M kernel): A's column k read times kscale[k], a vector [K] in
// the activations' storage (kernels/gemm_tiles.cl's K_SCALE). affine (optional; not with the
// small-M kernel): A's column k read through per-channel nodes (kernels/gemm_affine.cl).
std::vector<Launch> EncodeGemm(OpContext& ctx, const GemmPlan& p, cl_mem a, cl_mem b, cl_mem bias,
                               cl_mem c, int m, int n, int k, float act_min, float act_max,
                               cl_mem residual = nullptr, float b_max_abs = -1.0f,
                               cl_mem slopes = nullptr, cl_mem kscale = nullptr,
                               const AffineA* affine = nullptr);

// ctx.out_ldc > 0: rows of C written at that pitch and ctx.out_offset into a folded
// CONCATENATION's tensor (kernels/gemm_tiles.cl's OUT_SLICE; not with the small-M kernel).
// ctx.in_ldc > 0: rows of A read at that pitch (A_PITCH; not with the small-M kernel).

// gemm_splitk_reduce's arguments after those SetArgsAndOptional set (the residual's included):
// the slopes when given, then ctx's concatenation slice when it has one.
void SetReduceExtras(const Kernel& k, const OpContext& ctx, cl_mem residual, cl_mem slopes);

// The largest |v| of the values (NaN ignored; +Inf if one is infinite): EncodeGemm's b_max_abs.
float MaxAbs(const std::vector<float>& v);

}  // namespace clgpu
