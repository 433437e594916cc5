// The int8 branches of the ops that have one, each defined in its op's <op>_int8.cc: the op's
// Check and Create (in <op>.cc) hand a node over to these when its tensors are quantized. An
// int8 op reads quantization through GraphView::quant, computes its multipliers with
// ops/quant.h and requantizes on the device with kernels/quant.cl.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ops/op.h"

namespace clgpu {

std::string CheckConv2dInt8(const GraphView& g, const NodeInfo& node);
std::unique_ptr<Op> CreateConv2dInt8(const GraphView& g, const NodeInfo& node);
// XNNPACK's time for an int8 CONV_2D node on this host (OpHandler::cpu_int8_kernel_ns).
double Conv2dInt8CpuNs(const GraphView& g, const NodeInfo& n, const CpuHost& host);

std::string CheckDepthwiseConv2dInt8(const GraphView& g, const NodeInfo& node);
std::unique_ptr<Op> CreateDepthwiseConv2dInt8(const GraphView& g, const NodeInfo& node);

std::string CheckFullyConnectedInt8(const GraphView& g, const NodeInfo& node);
std::unique_ptr<Op> CreateFullyConnectedInt8(const GraphView& g, const NodeInfo& node);

// ADD, SUB, MUL and PRELU (binary_int8.cc; CreateAddInt8 makes all four, CheckAddInt8 checks
// all but MUL).
std::string CheckAddInt8(const GraphView& g, const NodeInfo& node);
std::string CheckMulInt8(const GraphView& g, const NodeInfo& node);
std::unique_ptr<Op> CreateAddInt8(const GraphView& g, const NodeInfo& node);

// Element-wise ops computed as a table of the input's 256 integers (lut_int8.cc): LOGISTIC,
// TANH, ELU, HARD_SWISH, the RELU family, LEAKY_RELU. `name` outlives the op (a handler's).
std::string CheckLutInt8(const GraphView& g, const NodeInfo& node);
std::unique_ptr<Op> CreateLutInt8(const GraphView& g, const NodeInfo& node, const char* name);

// Tables of element-wise chains folded into the int8 op producing their input (fusion/epilogue.cc,
// AttachTable), indexed by the input integer's low byte: "" and the table, or the reason there
// is none. Int8UnaryTable: one of the ops above. Int8MulTable: MUL(x, s) or MUL(s, x)
// (binary_int8.cc) whose operand s is s_of_x applied to x (swish: x * LOGISTIC(x)), both of the
// output's shape. Int8PreluTable: PRELU(x, alpha) (binary_int8.cc) whose alpha is one constant
// slope however it is shaped (PyTorch's nn.PReLU(), one parameter), or a slope per channel of x
// (the last axis; shaped as ones then C): then C tables one after another, channel c's from
// c * 256 on (kernels/quant.cl's QUANT_TABLE_CHANNELS).
std::string Int8UnaryTable(const GraphView& g, const NodeInfo& node, std::vector<uint8_t>* table);
std::string Int8MulTable(const GraphView& g, const NodeInfo& mul, int x,
                         const std::vector<uint8_t>& s_of_x, std::vector<uint8_t>* table);
std::string Int8PreluTable(const GraphView& g, const NodeInfo& prelu, int x,
                           std::vector<uint8_t>* table);
// Int8GateParams: an int8 MUL(x, gate) (or MUL(gate, x)) as a GEMM computes its bytes where it
// loads x (ops/gemm_int8.h's Int8Gate order: x offset, gate offset, multiplier, shift, zero,
// lo, hi), or empty with the reason in *why.
std::vector<int> Int8GateParams(const GraphView& g, const NodeInfo& mul, int x, std::string* why);
// Int8ScalarTable: ADD, SUB or MUL of x and a constant scalar, in either order (binary_int8.cc;
// Keras's hard sigmoid's / 6 and Rescaling's scale and offset after int8 conversion).
std::string Int8ScalarTable(const GraphView& g, const NodeInfo& n, int x,
                            std::vector<uint8_t>* table);

// SOFTMAX (softmax_int8.cc).
std::string CheckSoftmaxInt8(const GraphView& g, const NodeInfo& node);
std::unique_ptr<Op> CreateSoftmaxInt8(const GraphView& g, const NodeInfo& node, float beta);

// MEAN (mean_int8.cc).
std::string CheckMeanInt8(const GraphView& g, const NodeInfo& node);
std::unique_ptr<Op> CreateMeanInt8(const GraphView& g, const NodeInfo& node);

// TRANSPOSE_CONV (transpose_conv_int8.cc).
std::string CheckTransposeConvInt8(const GraphView& g, const NodeInfo& node);
std::unique_ptr<Op> CreateTransposeConvInt8(const GraphView& g, const NodeInfo& node);

}  // namespace clgpu
