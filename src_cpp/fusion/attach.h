// How a pass attaches a fold to an op for one plan (ops/attachments.h): each function checks
// that the op can take it, records it and rewires the op's inputs or outputs. Nothing is taken
// off again: the partition starts each plan from fresh attachments.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ops/op.h"

namespace clgpu {

// A residual ADD (after FoldTarget::CanFuseResidual): `residual` becomes the last input and
// `output` the only output. The kernels add it before the clamp and any epilogue, so an epilogue
// attached first for the same fold is the ADD's, applied after it (fusion/residual.cc).
void AttachResidual(Attachments& a, int residual, int output, const ResidualAdd& add);
// The clamp [lo, hi], writing `output`; false (nothing changed) if the op applies no clamp,
// already takes one, has a residual, or the bounds do not overlap its own.
bool AttachClamp(Attachments& a, const Op& op, int output, float lo, float hi);
// An element-wise epilogue, writing `output`; false (nothing changed) if the op does not clamp in
// its store or already takes an epilogue or a residual.
bool AttachEpilogue(Attachments& a, const Op& op, int output, int kind, float alpha,
                    std::vector<PostClamp> post);
// The int8 form: the chain's 256 results as a table of the requantized integers, or one such
// table per channel of the op's output (`channels` of them, channel c's from c * 256 on: a PRELU
// of a slope per channel); false (nothing changed) unless the op takes tables and nothing else of
// the kind.
bool AttachTable(Attachments& a, const Op& op, int output, std::vector<uint8_t> table,
                 int channels);
// A QUANTIZE of the op's float output (after FoldTarget::TakesQuantize): output 0 becomes the
// QUANTIZE's `output`, stored quantized to `q`; false (nothing changed) if the op writes through
// a view or a slice, or takes one already.
bool AttachQuantize(Attachments& a, const Op& op, int output, QuantParams q, bool uint8);
// A PRELU of per-channel `slopes` (a constant tensor of the output's channels), after the
// activation and any residual (FoldTarget::TakesSlopes checked by the pass): writing `output`,
// the slopes the last input; false (nothing changed) if the op takes an epilogue already.
bool AttachSlopes(Attachments& a, int output, int slopes);
// A gate MUL before the op (FoldTarget::TakesGate checked by the pass): input 0 becomes `input`,
// the MUL's other operand, and `gate` is appended; `quant`: an int8 MUL's arithmetic (Attachments::
// Gate).
void AttachGate(Attachments& a, int input, int gate, std::vector<int> quant = {});
// Operand `i` becomes `source`, seen through `view` (shaped like the operand).
void AttachInputView(Attachments& a, size_t i, int source, StridedView view);
// Output 0 becomes `output`, which holds it as `view` (shaped like the op's own output), times
// `scale`.
void AttachOutputView(Attachments& a, int output, StridedView view, float scale);
// A squeeze's dense ops (after FoldTarget::TakesSqueeze): output 0 becomes `output`, the last
// one's, or that of `softmax` (null: none) over it. The ops must outlive the plan.
void AttachSqueeze(Attachments& a, std::vector<Op*> dense, int output, Op* softmax = nullptr);
// Depthwise-separable blocks run by the op (the last block's 1x1, null there): input 0 becomes
// the first block's input.
void AttachDsChain(Attachments& a, std::vector<Attachments::DsChain::Block> blocks, int input);
// Dense layers run by the op before its own (a FULLY_CONNECTED of one input): input 0 becomes
// the first layer's input, `own` the shape of the op's own input.
void AttachDenseChain(Attachments& a, std::vector<Attachments::DenseChain::Layer> layers, Shape own,
                      int input);
// A depthwise `dw` (after FoldTarget::TakesDepthwise): input 0 becomes dw's input, `shape` that
// of dw's output. The op must outlive the plan.
void AttachDepthwise(Attachments& a, Op* dw, int input, Shape shape);
// After AttachDepthwise, the 1x1 convolution `ex` computing the depthwise's input: input 0
// becomes ex's input, `shape` that of ex's output.
void AttachExpand(Attachments& a, Op* ex, int input, Shape shape);
// Per-channel MUL / ADD nodes (after FoldTarget::TakesAffine): input 0 becomes their source
// `input`, and `scale`, `shift` (-1: that node is absent) follow it as inputs.
void AttachAffine(Attachments& a, int input, int scale, int shift, float lo1, float hi1, float lo2,
                  float hi2);
// A PAD: input 0 becomes the PAD's input `input`.
void AttachPad(Attachments& a, int input, InputPad pad);
// A 2x2 max pool of stride 2 after the op (FoldTarget::TakesPool checked by the pass): output 0
// becomes the pool's `output`.
void AttachPool(Attachments& a, int output);
// A squeeze `mean` reading the op's output of shape `shape` (FoldTarget::TakesSqueezeTail checked
// by the pass): output 0 becomes the squeeze's `output`. The op must outlive the plan.
void AttachSqueezeTail(Attachments& a, Op* mean, Shape shape, int output);
// A chain of data-movement ops ending in the op (Op::IndexStageOf): input 0 becomes the first
// one's `input`, and the op writes through `stages`, its own first.
void AttachChain(Attachments& a, int input, std::vector<IndexStage> stages);
// A CONCATENATION of the op's output (FoldTarget::TakesOutputSlice checked by the pass): output 0
// becomes the concatenation's `output`, row m of the op's written at ldc * m + offset there.
void AttachOutputSlice(Attachments& a, int output, int ldc, int offset);
// Input 0 read at row pitch `ldc`: the first values of each row of a wider tensor that holds it
// (a concatenation chain, fusion/concat_chain.cc; FoldTarget::TakesInputPitch checked by the pass).
void AttachInputPitch(Attachments& a, int ldc);

}  // namespace clgpu
