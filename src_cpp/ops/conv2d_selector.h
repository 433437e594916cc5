// Convolution algorithms: which one to run on this device ("should", conv2d_selector.cc),
// and the calls that reach the chosen one's own file (ops/conv2d_algorithm.h): whether it
// applies to a shape, its weight preparation, scratch needs and launches.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ops/conv_geometry.h"
#include "ops/gemm.h"
#include "ops/op.h"
#include "ops/tuning.h"

namespace clgpu {

enum class ConvAlgorithm {
  kDirect,
  kGemm1x1,
  kImplicitGemm,
  kWinograd,
  kWinograd4,
  kDirectBlocked,
  kWinograd4Fused  // F(4x4) in one kernel (conv2d_winograd4_fused.cl)
};

// The option conv_algorithm's values that force one algorithm ("auto" aside), in one order.
const std::vector<std::string>& ConvAlgorithmNames();

std::string ConvAlgorithmName(ConvAlgorithm a);

// Correct for this geometry? (Winograd F(2x2): 3x3, F(4x4) and its fused kernel: 3x3 to 9x9, all
// stride 1, dilation 1; GEMM: 1x1 stride 1 without padding; direct and direct_blocked: any.)
bool ConvAlgorithmApplies(ConvAlgorithm a, const ConvGeometry& g);

// The forced algorithm (option conv_algorithm) when it applies, else the one
// expected to be fastest on this device.
ConvAlgorithm SelectConvAlgorithm(const ConvGeometry& g, const DeviceInfo& dev,
                                  const std::string& forced);

// A CONV_2D or DEPTHWISE_CONV_2D node's geometry from the graph's shapes and its parameters
// (for planning before an op exists); nullopt when they do not make one.
std::optional<ConvGeometry> GraphConvGeometry(const GraphView& g, const NodeInfo& n);

// Kernels per invoke of the algorithm SelectConvAlgorithm picks with default options (the cost
// model's count): split-K GEMMs and Winograd launch more than one.
LaunchCount ConvLaunches(const ConvGeometry& g, const DeviceInfo& dev);
// The same for a CONV_2D node from the graph (the int8 one plans its own GEMM: one launch).
LaunchCount GraphConvLaunches(const GraphView& g, const NodeInfo& n, const DeviceInfo& dev);

// Bytes of the device-side filter of algorithm `a` (Winograd: the transformed U, or the
// OHWI upload it is made from if larger; direct_blocked and winograd4_fused: OC padded to their
// channel block).
size_t ConvWeightBytes(const OpContext& ctx, ConvAlgorithm a, const ConvGeometry& g);

// SelectConvAlgorithm, unless that is Winograd and even one output channel's
// transformed filter would exceed the largest allocation: then implicit GEMM, whose
// filter is the plain OHWI one (and splits by output channels).
ConvAlgorithm ChooseConvAlgorithm(const OpContext& ctx, const ConvGeometry& g);

// Whether a filter has a weight that dwarfs the others (|w| over 1024 times the median nonzero
// |w|), which Winograd must not run: its transforms spread each weight over a tile's products,
// so an output that the CPU sums from small terms comes out as the rounding error of huge ones
// (a fuzzed weight of 3e36 whose products a RELU zeroes on the CPU). The public models' trained
// filters wider than 1x1 reach 80 (palm_detection_lite's 5x5); their 1x1 ones, which no Winograd
// runs, 4500.
bool WinogradSpreadsOutlier(const std::vector<float>& filter);

// Device-side weights in the layout the algorithm wants (transformed once).
struct ConvWeights {
  // OHWI, the Winograd-transformed U, direct_blocked's [OC / OCB][KH][KW][C][OCB] or
  // winograd4_fused's U [OC / OCB][CPAD][36][OCB]
  Buffer filter;
  // Winograd's: the OHWI filter too, for the tiles computed directly (kernels/common.cl,
  // store_winograd_tile).
  Buffer plain;
  int ocb = 0, cpad = 0;  // winograd4_fused: the blocking its U is laid out for
  float max_abs = -1.0f;  // the largest |weight| (the GEMM's overflow guard, ops/gemm.h)
};

std::shared_ptr<ConvWeights> PrepareConvWeights(OpContext& ctx, ConvAlgorithm a,
                                                const ConvGeometry& g,
                                                const std::vector<float>& filter_ohwi);

// Scratch bytes per slot (Winograd: V and Mo for one pass of tile rows; winograd4_fused: none).
std::vector<size_t> ConvScratchBytes(const OpContext& ctx, ConvAlgorithm a, const ConvGeometry& g);

// residual (optional, any algorithm): out = act(conv + bias + residual), residual laid out like
// out (a fused ADD); the kernel that writes out adds it (split-K: the reduce). slopes (optional,
// any algorithm): then a PRELU of one slope per output channel, [OC] in the float
// storage (fusion/prelu.cc, kernels/common.cl's CHANNEL_SLOPES).
std::vector<Launch> EncodeConv(OpContext& ctx, ConvAlgorithm a, const ConvGeometry& g, cl_mem in,
                               const ConvWeights& w, cl_mem bias, cl_mem out, float act_min,
                               float act_max, cl_mem residual = nullptr, cl_mem slopes = nullptr);

// A depthwise convolution (depth multiplier 1) whose output is a 1x1 convolution's input, folded
// into it (fusion/depthwise.cc): the 1x1's implicit GEMM computes that tensor where it reads it
// (kernels/conv2d_implicit_gemm.cl's DW_A). g: the depthwise's geometry; filter [KH][KW][C] in
// the float storage, bias [C] float32, its clamp.
struct FloatDepthwiseA {
  ConvGeometry g;
  cl_mem filter = nullptr, bias = nullptr;
  float act_min = 0, act_max = 0;
  // Its folded epilogue, as build defines of kernels/conv2d_implicit_gemm.cl's DW_ACTIVATE
  // (CLGPU_DW_EPILOGUE, CLGPU_DW_POST<i>); "" for none.
  std::string epilogue;
  // The 1x1 convolution computing the depthwise's input (fusion/expand.cc; kernels'
  // EXPAND_A): its `expand_c` input channels, [g.c][expand_c] weights, bias and clamp. Null
  // weights: the depthwise reads its input as it is.
  int expand_c = 0;
  cl_mem expand_filter = nullptr, expand_bias = nullptr;
  float expand_min = 0, expand_max = 0;
};

// The launches of a 1x1 convolution of `oc` outputs and plain [oc][C] weights `w` over dw's
// output, computed from dw's input `in` (residual as in EncodeConv, slopes as in
// EncodeImplicitGemmConv); its scratch. K splits down to one tile per group, each tile carrying
// the depthwise's taps.
std::vector<Launch> EncodeDepthwiseGemm(OpContext& ctx, const FloatDepthwiseA& dw, int oc,
                                        cl_mem in, const ConvWeights& w, cl_mem bias, cl_mem out,
                                        float act_min, float act_max, cl_mem residual = nullptr,
                                        cl_mem slopes = nullptr);
std::vector<size_t> DepthwiseGemmScratchBytes(const OpContext& ctx, const ConvGeometry& dw, int oc);
// Its kernels per invoke with default options (the cost model's count); `expand_c`: the input
// channels of a folded expand (0: none), which small layers run in one block kernel
// (kernels/inverted_residual.cl).
// With what its split's one-launch form adds (ops/gemm.h LaunchCount).
LaunchCount DepthwiseGemmLaunches(const DeviceInfo& dev, const ConvGeometry& dw, int oc,
                                  int expand_c);
// That GEMM's tiles on this device: it computes the depthwise's taps once for each tile_n of the
// `oc` outputs.
GemmTiles DepthwiseGemmTiles(const DeviceInfo& dev, const ConvGeometry& dw, int oc);
// The launches of the implicit GEMM (as EncodeConv) with what only the GEMMs take: its input
// seen through `affine` (null: none), and a PRELU of per-channel `slopes` [OC] in the float
// storage (null: none) after the activation and residual (fusion/prelu.cc,
// kernels/gemm_tiles.cl's CHANNEL_SLOPES). Its scratch and kernels are the implicit GEMM's.
std::vector<Launch> EncodeImplicitGemmConv(OpContext& ctx, const ConvGeometry& g, cl_mem in,
                                           const ConvWeights& w, cl_mem bias, cl_mem out,
                                           float act_min, float act_max, cl_mem residual,
                                           const AffineA* affine, cl_mem slopes);
// The same for a 1x1 convolution the plain GEMM runs (ConvAlgorithm::kGemm1x1) with slopes, a
// gate (its input's channel c read times gate[c]; null: none) and / or its input seen through
// `affine` (null: none), a gate or an affine only where Gemm1x1Tiled.
std::vector<Launch> EncodeGemm1x1With(OpContext& ctx, const ConvGeometry& g, cl_mem in,
                                      const ConvWeights& w, cl_mem bias, cl_mem out, float act_min,
                                      float act_max, cl_mem residual, cl_mem slopes, cl_mem gate,
                                      const AffineA* affine = nullptr);
// Whether the plain GEMM runs the 1x1 convolution g in its tiled kernels, not the small-M one
// for a few rows, which takes no gate and writes no concatenation.
bool Gemm1x1Tiled(const DeviceInfo& dev, const ConvGeometry& g);
// Whether algorithm `a` runs g as one of the GEMMs whose stores take a row pitch and an offset
// (OpContext::out_ldc, a folded concatenation): the implicit GEMM, or the plain one but for its
// small-M kernel. The op (Conv2dOp) and the pass's graph-level Find (fusion/concat.cc) ask it.
bool GemmWritesSlices(ConvAlgorithm a, const DeviceInfo& dev, const ConvGeometry& g);

// The products of a folded expand (`expand_c` input channels) that the block kernel computes
// for the depthwise `dw` and `oc` outputs (each group's input pixels once), or -1 where that
// kernel would not run the block (float blocks of small maps only).
double BlockExpandProducts(const DeviceInfo& dev, const ConvGeometry& dw, int oc, int expand_c);
// Whether the block kernels may run (research: $CLGPU_IR_BLOCK=0 leaves blocks to the GEMMs'
// EXPAND_A; bench/ab_options.py env.*), read at each use, as ab_options sets it between delegates.
bool BlockKernelAllowed();
// The products one depthwise output element may cost inside the GEMM (taps x EC), each a chain
// of loads in one work-item: past the device profile's cap the GEMM's EXPAND_A waits on that
// chain longer than the launch it saves takes. `int8`: the int8 GEMM's cap. $CLGPU_EXPAND_CHAIN
// replaces both, $CLGPU_EXPAND_CHAIN_INT8 the int8 one (research: bench/ab_options.py env.*),
// read at each use since ab_options sets them between delegates.
long ExpandChainCap(const DeviceInfo& dev, bool int8 = false);
// Whether a block kernel's group of 256 work-items may take an expand over `in_pixels` input
// pixels from `ec` to `c` channels: the device profile's block_item_products per work-item, or
// $CLGPU_IR_BLOCK_ITEM's (research: bench/ab_options.py env.*).
bool BlockItemsFit(const DeviceInfo& dev, long in_pixels, long c, long ec);
// The block kernels' cap on the expanded channels of a pass (research: $CLGPU_IR_BLOCK_CHUNK, a
// multiple of 4, to test several passes on small blocks), or 0: none.
long BlockChunkCap();

}  // namespace clgpu
