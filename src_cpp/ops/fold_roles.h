// The two roles an op may play in a fold (fusion/'s passes): a target, whose kernels can take
// other nodes' work in (Op::fold_target), and a source, whose work another op's kernels can do
// (Op::fold_source). Each op implements the roles it has; the defaults say "no".
#pragma once

#include <vector>

#include "graph/graph.h"
#include "ops/op_parts.h"

namespace clgpu {

struct OpContext;        // ops/op.h
struct Int8Dense;        // ops/squeeze.h
struct FloatDense;       // ops/squeeze.h
struct SqueezeSoftmax;   // ops/squeeze.h
struct Int8DepthwiseA;   // ops/gemm_int8.h
struct FloatDepthwiseA;  // ops/conv2d_selector.h
struct Int8MeanStage;    // ops/squeeze.h

// What a MEAN runs of the dense ops after it (FoldTarget::TakesSqueeze).
enum class SqueezeType { kNone, kInt8, kFloat };

// What an op's kernels can take in, for the shapes of its own (unfolded) inputs.
class FoldTarget {
 public:
  // A residual ADD of its output (fusion/residual.cc).
  virtual bool CanFuseResidual(const OpContext& ctx, const std::vector<Shape>& in) const {
    (void)ctx, (void)in;
    return false;
  }
  // The op's own clamp bounds; false if it applies none. Ops that clamp in their store
  // (OpHandler::clamp_epilogue) take a clamp activation and an epilogue (fusion/clamp.cc,
  // fusion/epilogue.cc).
  virtual bool GetClamp(float* lo, float* hi) const {
    (void)lo, (void)hi;
    return false;
  }
  // An int8 epilogue as a table of its requantized integers (the int8 GEMMs and convolutions).
  virtual bool TakesTable() const { return false; }
  // Operands and an output read and written through strides (ops/matmul_views.h).
  virtual bool TakesViews() const { return false; }
  // Which dense ops a MEAN runs after it, for an input of shape `in` (kNone: none).
  virtual SqueezeType TakesSqueeze(const Shape& in) const {
    (void)in;
    return SqueezeType::kNone;
  }
  // Input 0 read through per-channel MUL / ADD nodes (fusion/affine.cc), for these input shapes.
  virtual bool TakesAffine(const OpContext& ctx, const std::vector<Shape>& in) const {
    (void)ctx, (void)in;
    return false;
  }
  // A PRELU of a slope per output channel after its activation and residual (fusion/prelu.cc),
  // for these input shapes (the op's own and its folds' so far).
  virtual bool TakesSlopes(const OpContext& ctx, const std::vector<Shape>& in) const {
    (void)ctx, (void)in;
    return false;
  }
  // Input 0 read times a gate per channel that the partition computes (fusion/gate.cc), for
  // these input shapes (the op's own).
  virtual bool TakesGate(const OpContext& ctx, const std::vector<Shape>& in) const {
    (void)ctx, (void)in;
    return false;
  }
  // Input 0 computed as a depthwise convolution's output, for these input shapes.
  virtual bool TakesDepthwise(const OpContext& ctx, const std::vector<Shape>& in) const {
    (void)ctx, (void)in;
    return false;
  }
  // A 2x2 max pool of stride 2 over its output (fusion/pool.cc), for these input shapes.
  virtual bool TakesPool(const OpContext& ctx, const std::vector<Shape>& in) const {
    (void)ctx, (void)in;
    return false;
  }
  // An int8 squeeze (a MEAN with its dense ops) of its output, run at the end of its launch
  // (fusion/squeeze_tail.cc), for these input shapes with its folds so far.
  virtual bool TakesSqueezeTail(const OpContext& ctx, const std::vector<Shape>& in) const {
    (void)ctx, (void)in;
    return false;
  }
  // Its float output stored quantized, as a QUANTIZE of it would (fusion/requantize.cc).
  virtual bool TakesQuantize() const { return false; }
  // Its output written into a CONCATENATION's tensor, rows at a pitch and an offset
  // (fusion/concat.cc), for these input shapes with its folds so far.
  virtual bool TakesOutputSlice(const OpContext& ctx, const std::vector<Shape>& in) const {
    (void)ctx, (void)in;
    return false;
  }
  // Its input 0 read as the first values of each row of a wider tensor, rows at a pitch (a
  // concatenation extended in place, fusion/concat_chain.cc), for these input shapes with its
  // folds.
  virtual bool TakesInputPitch(const OpContext& ctx, const std::vector<Shape>& in) const {
    (void)ctx, (void)in;
    return false;
  }

 protected:
  ~FoldTarget() = default;  // owned as the op it is part of
};

// What an op can be folded into another as.
class FoldSource {
 public:
  // An ADD that may fold into the producer of its operand other than `residual`: true, with
  // what the producer then applies.
  virtual bool IsResidualAdd(int residual, ResidualAdd* add) const {
    (void)residual, (void)add;
    return false;
  }
  // The int8 form of this op applied to one row of an input of shape `in` (FULLY_CONNECTED, a
  // CONV_2D of a 1x1 filter over a 1x1 image), its weights uploaded; false for other shapes and
  // folds (a residual, views).
  virtual bool GetInt8Dense(OpContext& ctx, const Shape& in, Int8Dense* dense) {
    (void)ctx, (void)in, (void)dense;
    return false;
  }
  // The same on float values (the context's float storage), its clamp and epilogue included.
  virtual bool GetFloatDense(OpContext& ctx, const Shape& in, FloatDense* dense) {
    (void)ctx, (void)in, (void)dense;
    return false;
  }
  // This SOFTMAX over one row of n values as a squeeze's last step runs it (its beta; int8: its
  // table uploaded, the output's scale and zero point); false for other ops and types.
  virtual bool GetSqueezeSoftmax(OpContext& ctx, int n, bool int8, SqueezeSoftmax* softmax) {
    (void)ctx, (void)n, (void)int8, (void)softmax;
    return false;
  }
  // This int8 MEAN's (or whole-image AVERAGE_POOL_2D's) own arithmetic over an input of shape
  // `in`, as a squeeze's first step runs it; false for other ops, shapes and types.
  virtual bool GetInt8MeanStage(const Shape& in, Int8MeanStage* stage) {
    (void)in, (void)stage;
    return false;
  }
  // The int8 form of this depthwise convolution over an input of shape `in`, its weights
  // uploaded; false for other shapes (depth multiplier 1, C % 4 == 0) and folds.
  virtual bool GetInt8Depthwise(OpContext& ctx, const Shape& in, Int8DepthwiseA* dw) {
    (void)ctx, (void)in, (void)dw;
    return false;
  }
  // The same on float values (depth multiplier 1, its clamp and epilogue).
  virtual bool GetFloatDepthwise(OpContext& ctx, const Shape& in, FloatDepthwiseA* dw) {
    (void)ctx, (void)in, (void)dw;
    return false;
  }
  // This 1x1 convolution of stride 1 over an input of shape `in` with nothing folded into it
  // but a clamp: its plain [OC][C] weights in the float storage, bias and clamp (`dense->n` OC,
  // `dense->k` C); false for other ops, shapes and folds.
  virtual bool GetFloatPointwise(OpContext& ctx, const Shape& in, FloatDense* dense) {
    (void)ctx, (void)in, (void)dense;
    return false;
  }

 protected:
  ~FoldSource() = default;  // owned as the op it is part of
};

}  // namespace clgpu
