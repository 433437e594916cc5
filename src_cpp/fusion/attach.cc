// The folds' attach functions (fusion/attach.h).
#include "fusion/attach.h"

#include <algorithm>
#include <string>
#include <utility>

#include "common/error.h"

namespace clgpu {

void AttachResidual(Attachments& a, int residual, int output, const ResidualAdd& add) {
  if (a.outputs.size() != 1 || a.residual.on)
    throw Error("only an op with one output can fold in an ADD, once");
  a.inputs.push_back(residual);
  a.outputs[0] = output;
  a.residual = Attachments::Residual{true, add.act_min, add.act_max, add.quant};
}

bool AttachClamp(Attachments& a, const Op& op, int output, float lo, float hi) {
  const FoldTarget* target = op.fold_target();
  float own_lo, own_hi;
  if (a.clamp.on || a.residual.on || a.outputs.size() != 1 || !target ||
      !target->GetClamp(&own_lo, &own_hi))
    return false;
  // clamp(clamp(x, a, b), c, d) = clamp(x, max(a, c), min(b, d)) when the ranges overlap.
  const float new_lo = std::max(own_lo, lo), new_hi = std::min(own_hi, hi);
  if (new_lo > new_hi) return false;
  a.clamp = Attachments::Clamp{true, new_lo, new_hi};
  a.outputs[0] = output;
  return true;
}

bool AttachEpilogue(Attachments& a, const Op& op, int output, int kind, float alpha,
                    std::vector<PostClamp> post) {
  const FoldTarget* target = op.fold_target();
  float lo, hi;
  if (kind == 0 || a.epilogue.kind != 0 || a.residual.on || a.outputs.size() != 1 ||
      post.size() > kMaxPostClamps || !target || !target->GetClamp(&lo, &hi))
    return false;
  a.epilogue = Attachments::Epilogue{kind, alpha, {}, std::move(post)};
  a.outputs[0] = output;
  return true;
}

bool AttachTable(Attachments& a, const Op& op, int output, std::vector<uint8_t> table,
                 int channels) {
  const FoldTarget* target = op.fold_target();
  if (!target || !target->TakesTable() ||
      (table.size() != 256 && (channels <= 1 || table.size() != 256 * size_t(channels))) ||
      a.epilogue.kind != 0 || a.residual.on || a.outputs.size() != 1)
    return false;
  a.epilogue = Attachments::Epilogue{kTableEpilogue, 0.0f, std::move(table), {}};
  a.outputs[0] = output;
  return true;
}

bool AttachQuantize(Attachments& a, const Op& op, int output, QuantParams q, bool uint8) {
  const FoldTarget* target = op.fold_target();
  if (!target || !target->TakesQuantize() || a.quantize.on || a.outputs.size() != 1 ||
      a.out_view.on || a.out_slice.on || a.pool.on)
    return false;
  a.quantize = Attachments::Quantize{true, std::move(q), uint8};
  a.outputs[0] = output;
  return true;
}

bool AttachSlopes(Attachments& a, int output, int slopes) {
  if (a.epilogue.kind != 0 || a.outputs.size() != 1 || slopes < 0) return false;
  a.epilogue = Attachments::Epilogue{kSlopeEpilogue, 0.0f, {}, {}, slopes};
  a.outputs[0] = output;
  a.inputs.push_back(slopes);
  return true;
}

void AttachGate(Attachments& a, int input, int gate, std::vector<int> quant) {
  if (a.inputs.empty() || a.gate.on || gate < 0) throw Error("a gate fold needs an op's input");
  a.inputs[0] = input;
  a.inputs.push_back(gate);
  a.gate = Attachments::Gate{true, a.inputs.size() - 1, std::move(quant)};
}

void AttachInputView(Attachments& a, size_t i, int source, StridedView view) {
  if (i >= a.inputs.size()) throw Error("no operand " + std::to_string(i) + " to fold a view into");
  if (a.in_views.size() < a.inputs.size()) a.in_views.resize(a.inputs.size());
  a.in_views[i] = Attachments::View{true, std::move(view), 1.0f};
  a.inputs[i] = source;
}

void AttachOutputView(Attachments& a, int output, StridedView view, float scale) {
  if (a.outputs.size() != 1) throw Error("only an op with one output can fold an output view");
  a.out_view = Attachments::View{true, std::move(view), scale};
  a.outputs[0] = output;
}

void AttachSqueeze(Attachments& a, std::vector<Op*> dense, int output, Op* softmax) {
  if (a.outputs.size() != 1 || dense.empty() || !a.squeeze.empty())
    throw Error("a squeeze needs one output, a dense op");
  a.squeeze = std::move(dense);
  a.squeeze_softmax = softmax;
  a.outputs[0] = output;
}

void AttachDepthwise(Attachments& a, Op* dw, int input, Shape shape) {
  if (a.inputs.empty() || !dw || a.depthwise.op || !a.ds_chain.blocks.empty())
    throw Error("a depthwise fold needs an input and its op");
  a.depthwise = Attachments::Depthwise{dw, std::move(shape), nullptr, {}};
  a.inputs[0] = input;
}

void AttachDsChain(Attachments& a, std::vector<Attachments::DsChain::Block> blocks, int input) {
  if (a.inputs.empty() || blocks.size() < 2 || !a.ds_chain.blocks.empty() || a.depthwise.op)
    throw Error("a depthwise-separable chain needs an input, two blocks and no depthwise fold");
  a.ds_chain.blocks = std::move(blocks);
  a.inputs[0] = input;
}

void AttachDenseChain(Attachments& a, std::vector<Attachments::DenseChain::Layer> layers, Shape own,
                      int input) {
  if (a.inputs.size() != 1 || layers.empty() || !a.dense_chain.layers.empty())
    throw Error("a dense chain needs an op of one input and a layer before it");
  a.dense_chain.layers = std::move(layers);
  a.dense_chain.own = std::move(own);
  a.inputs[0] = input;
}

void AttachExpand(Attachments& a, Op* ex, int input, Shape shape) {
  if (!a.depthwise.op || a.depthwise.expand || !ex)
    throw Error("an expand fold needs a folded depthwise and its op");
  a.depthwise.expand = ex;
  a.depthwise.expand_shape = std::move(shape);
  a.inputs[0] = input;
}

void AttachAffine(Attachments& a, int input, int scale, int shift, float lo1, float hi1, float lo2,
                  float hi2) {
  if (a.inputs.size() != 1 || a.affine.on || (scale < 0 && shift < 0))
    throw Error("an affine fold needs an op of one input and a MUL or an ADD");
  a.affine = Attachments::Affine{true, scale >= 0, shift >= 0, lo1, hi1, lo2, hi2};
  a.inputs[0] = input;
  for (int t : {scale, shift})
    if (t >= 0) a.inputs.push_back(t);
}

void AttachPad(Attachments& a, int input, InputPad pad) {
  if (a.inputs.empty() || a.pad.on) throw Error("a PAD fold needs an input");
  a.pad = Attachments::Pad{true, pad};
  a.inputs[0] = input;
}

void AttachPool(Attachments& a, int output) {
  if (a.outputs.size() != 1 || a.pool.on || a.residual.on)
    throw Error("only an op with one output and no residual can fold in a pool, once");
  a.pool.on = true;
  a.outputs[0] = output;
}

void AttachSqueezeTail(Attachments& a, Op* mean, Shape shape, int output) {
  if (!mean || a.outputs.size() != 1 || a.tail_squeeze.op || a.pool.on || a.residual.on ||
      a.out_slice.on || a.out_view.on)
    throw Error("only an op with one plain output and no residual can fold in a squeeze, once");
  a.tail_squeeze.op = mean;
  a.tail_squeeze.shape = std::move(shape);
  a.outputs[0] = output;
}

void AttachOutputSlice(Attachments& a, int output, int ldc, int offset) {
  if (a.outputs.size() != 1 || a.out_slice.on || a.out_view.on || a.pool.on || ldc <= 0 ||
      offset < 0)
    throw Error("only an op with one output written as it is can write into a concatenation");
  a.out_slice = Attachments::OutSlice{true, ldc, offset};
  a.outputs[0] = output;
}

void AttachInputPitch(Attachments& a, int ldc) {
  if (a.inputs.empty() || a.in_pitch.on || ldc <= 0)
    throw Error("only an op with an input can read it at a pitch, once");
  a.in_pitch = Attachments::InPitch{true, ldc};
}

void AttachChain(Attachments& a, int input, std::vector<IndexStage> stages) {
  if (a.inputs.size() != 1 || a.chain.on) throw Error("a gather chain needs an op of one input");
  a.chain = Attachments::Chain{true, std::move(stages)};
  a.inputs[0] = input;
}

}  // namespace clgpu
