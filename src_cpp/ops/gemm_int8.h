// The int8 GEMM (kernels/gemm_int8.cl) behind FULLY_CONNECTED and the int8 convolutions:
// out[M][N] = requantize(A[M][K] x B[N][K]^T + bias) in int32, A a plain matrix or the im2col of
// an NHWC input (implicit GEMM, never materialised). The dot-product instruction is the
// device's (cl/int8_dot.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops/conv_geometry.h"
#include "ops/op.h"
#include "ops/quant.h"

namespace clgpu {

struct Int8TailSqueeze;  // ops/squeeze.h

// B packed four int8 to an int along k (K padded to Kp, a multiple of 4) and the bias with
// -a_zero * sum_k B[n][k] folded in, on the device.
struct Int8GemmWeights {
  Buffer b, bias, stage;
  int n = 0, k = 0, kp = 0;
};

// b: [n][k] int8 (row-major), bias: n int32 values (empty: zeros), a_zero: A's zero point.
// Throws Error if a folded bias leaves int32.
Int8GemmWeights PrepareInt8Gemm(OpContext& ctx, const std::vector<int8_t>& b, int n, int k,
                                const std::vector<int32_t>& bias, int a_zero,
                                const OutputStage& stage);

// What an int8 GEMM's launches use beyond its weights, kept by the op that encodes them: the
// stage with a folded table, split-K's int32 sums and tile counters (one buffer), a folded ADD's
// parameters, and the launch's integers (gemm_int8.cl's prm) with its constant buffers packed
// into one where small (gemm_int8.cl's PACKED), else the integers alone (ParamBlock).
struct Int8GemmState {
  Buffer table_stage, sums, residual_params, consts;
  Buffer tail_sums, tail_consts;  // a squeeze folded after it (TAIL_SQUEEZE)
};

// A residual ADD folded into the GEMM (fusion/residual.cc): its other operand, laid out like the
// output, and the parameters of quant_add (kernels/quant.cl) with the GEMM's output first.
struct Int8Residual {
  cl_mem operand = nullptr;
  std::vector<int> params;
};

// A 2x2 max pool of stride 2 after an implicit GEMM's convolution (fusion/pool.cc,
// kernels/gemm_int8.cl's POOL2): the output is the pool's, ph x pw pixels an image, and the GEMM's
// m is four rows to each of them.
struct Int8Pool {
  int ph = 0, pw = 0;
};
// Whether this device's int8 GEMM tiles can take one (four rows to a window within a tile).
bool Int8GemmTakesPool(const DeviceInfo& dev);
// Whether they can take a squeeze after the GEMM (groups of a power of 2 up to 256 work-items).
bool Int8GemmTakesSqueezeTail(const DeviceInfo& dev);

// A depthwise convolution whose output is A (fusion/depthwise.cc, kernels/gemm_int8.cl's DW_A):
// A[m][k] is its output at pixel m (of g's output), channel k, computed from its input where the
// GEMM reads it. Depth multiplier 1, g.c % 4 == 0 and g.c == the GEMM's k; its output zero point is
// the GEMM's a_zero. Buffers: filter [KH][KW][C] int8, bias [C] int32, stage [C] (quant.cl).
struct Int8DepthwiseA {
  ConvGeometry g;
  cl_mem filter = nullptr, bias = nullptr, stage = nullptr;
  int in_zero = 0, up_below = 0, act_min = -128, act_max = 127;
  // The 1x1 convolution computing the depthwise's input (fusion/expand.cc; kernels/gemm_int8.cl's
  // EXPAND_A), as its own GEMM holds it: null `expand`: none. Its input has expand->k channels
  // (in fours); its output stage's parameters, a table excluded.
  const Int8GemmWeights* expand = nullptr;
  int expand_up_below = 0, expand_zero = 0, expand_min = -128, expand_max = 127;
};

// A gate MUL folded in before a plain A (fusion/gate.cc, kernels/gemm_int8_gate.cl): A is the
// MUL's output, `a` its operand x [m][k] and `gate` its vector of k channels, each byte as the
// MUL computes it: mul_int8's parameters (ops/binary_int8.cc's layout, p[0], p[1], p[3], p[4],
// p[9], p[10], p[11]: x_offset, gate_offset, multiplier, shift, zero, lo, hi).
struct Int8Gate {
  cl_mem gate = nullptr;
  int x_offset = 0, gate_offset = 0, multiplier = 0, shift = 0, zero = 0, lo = -128, hi = 127;
};

// The launch computing out [m][n] from A (plain when `im2col` is null, else the convolution
// input of that geometry, whose m = N * OH * OW and k = KH * KW * C). *path_used: the
// dot-product path it runs ("dp4a", "khr", "portable"), for profiles. One launch, split along K
// where its tiles would leave a GPU's compute units idle (or option gemm_splits); its buffers
// go to *state. With `dw`, A is that depthwise convolution's output over the input `a`. With
// `tail`, that squeeze of the output (m rows of one image) runs in the launch and `out` is its
// output (ops/squeeze.h). A stage
// with a table (OutputStage::table; the program built with
// -DQUANT_TABLE) is uploaded there instead of using w.stage.
std::vector<Launch> EncodeInt8Gemm(
    OpContext& ctx, const Int8GemmWeights& w, cl_mem a, cl_mem out, int m, int a_zero,
    const OutputStage& stage, Int8GemmState* state, const ConvGeometry* im2col = nullptr,
    std::string* path_used = nullptr, const Int8Residual* residual = nullptr,
    const Int8DepthwiseA* dw = nullptr, const Int8Pool* pool = nullptr,
    const Int8TailSqueeze* tail = nullptr, const Int8Gate* gate = nullptr);

// Whether EncodeInt8Gemm of this shape (with a depthwise folded in: dw) splits K (the
// algorithm's name in profiles), and the bytes of the int32 sums it would keep if the device's
// largest allocation allowed them (0: no split), which a chunk of a convolution must fit.
bool Int8GemmSplits(const OpContext& ctx, int m, int n, int k, bool dw = false);
// The output channels one group of an m x n GEMM over k with a folded depthwise computes (its
// taps are computed once for each such tile).
int Int8DepthwiseGemmTileN(const DeviceInfo& dev, int m, int n, int k);
size_t Int8GemmSumBytes(const OpContext& ctx, int m, int n, int k);

// The int8 inverted-residual block kernel (kernels/inverted_residual_int8.cl), for the 1x1
// GEMM `w` whose A is the depthwise `dw` over its folded expand (dw.expand): the expand's
// products it computes (ExpandFoldPays), or -1 where it would not run that block; and the block
// as one launch with the GEMM's stage and residual (a_zero: the depthwise's output zero point),
// or none (no plan, a table stage, a kernel that does not fit): EncodeInt8Gemm runs it then.
double Int8BlockExpandProducts(const DeviceInfo& dev, const ConvGeometry& dw, int oc, int ec);
std::vector<Launch> EncodeInt8Block(OpContext& ctx, const Int8GemmWeights& w, cl_mem in, cl_mem out,
                                    int a_zero, const OutputStage& stage, Int8GemmState* state,
                                    const Int8Residual* residual, const Int8DepthwiseA& dw,
                                    std::string* path_used);

// The dot-product path probed on this context's device (cl/int8_dot.h).
const std::string& Int8DotPathOf(const OpContext& ctx);

}  // namespace clgpu
