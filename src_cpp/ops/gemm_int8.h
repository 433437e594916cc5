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

// Scratch bytes (slot 0) for the int32 partial sums when the GEMM of an m-row output with these
// weights' n, k runs split along K (a GPU on which its tiles would leave compute units idle, or
// option gemm_splits); 0 when it runs whole.
size_t Int8GemmScratchBytes(const OpContext& ctx, int m, int n, int k);

// The launches computing out [m][n] from A (plain when `im2col` is null, else the convolution
// input of that geometry, whose m = N * OH * OW and k = KH * KW * C). *path_used: the
// dot-product path it runs ("dp4a", "khr", "portable"), for profiles. Split along K, two
// launches (partial sums into ctx.scratch[0], then their reduction and the output stage). A
// stage with a table (OutputStage::table; the program built with -DQUANT_TABLE) is uploaded to
// *table_stage, which the caller keeps, instead of using w.stage.
std::vector<Launch> EncodeInt8Gemm(OpContext& ctx, const Int8GemmWeights& w, cl_mem a, cl_mem out,
                                   int m, int a_zero, const OutputStage& stage,
                                   const ConvGeometry* im2col = nullptr,
                                   std::string* path_used = nullptr, Buffer* table_stage = nullptr);

// The dot-product path probed on this context's device (cl/int8_dot.h).
const std::string& Int8DotPathOf(const OpContext& ctx);

}  // namespace clgpu
