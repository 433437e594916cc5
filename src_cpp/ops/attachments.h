// What one plan folds into an op (fusion/'s passes decide it, fusion/attach.h fills it): the
// op's rewired inputs and outputs, and what its kernels then apply besides their own work. The
// partition keeps one per op and starts each plan from a fresh one, so nothing is ever undone;
// the op reads it, never changes it (Op::Attach).
#pragma once

#include <cstdint>
#include <vector>

#include "graph/graph.h"
#include "ops/epilogue.h"
#include "ops/index_chain.h"
#include "ops/op_parts.h"

namespace clgpu {

class Op;

struct Attachments {
  // The tensors the op reads and writes this plan: its own, as the folds below rewired them.
  std::vector<int> inputs, outputs;

  // A residual ADD (fusion/residual.cc): its other operand is the last input, laid out like the
  // output; the op writes act(its result + that operand) with the ADD's activation.
  struct Residual {
    bool on = false;
    float act_min = 0, act_max = 0;
    std::vector<int> quant;
  } residual;

  // A clamp activation (fusion/clamp.cc): the bounds the op clamps to instead of its own (its own
  // narrowed by the activation's).
  struct Clamp {
    bool on = false;
    float lo = 0, hi = 0;
  } clamp;

  // Element-wise nodes (fusion/epilogue.cc) applied after the clamp: kernels/common.cl's
  // CLGPU_EPILOGUE number and the MAXIMUM / MINIMUM after it, or an int8 table (kTableEpilogue)
  // of the requantized integers.
  struct Epilogue {
    int kind = 0;  // 0: none
    float alpha = 0;
    std::vector<uint8_t> table;  // kind kTableEpilogue
    std::vector<PostClamp> post;
    int slopes = -1;  // kind kSlopeEpilogue: the slopes' tensor, the op's last input
  } epilogue;

  // Views (fusion/views.cc, ops/matmul_views.h): an operand read in place from the tensor it
  // comes from, or the output written in place into the tensor it ends in, times `scale`.
  struct View {
    bool on = false;
    StridedView view;
    float scale = 1.0f;
  };
  std::vector<View> in_views;  // per operand (shorter: the rest as they are)
  View out_view;

  // A squeeze's dense ops (fusion/squeeze.cc, ops/squeeze.h), run after a MEAN in its launch;
  // the last one's output is the op's, or a SOFTMAX's over it (squeeze_softmax, not null).
  std::vector<Op*> squeeze;
  Op* squeeze_softmax = nullptr;

  // A depthwise convolution whose output is the op's input 0 (fusion/depthwise.cc), computed
  // where the op's GEMM loads A; `shape` that output's (the op's own input, never written). And
  // the 1x1 convolution computing the depthwise's input (fusion/expand.cc), `expand_shape` its
  // output's. Input 0 is the first of the chain's inputs.
  struct Depthwise {
    Op* op = nullptr;  // null: none
    Shape shape;
    Op* expand = nullptr;  // null: none
    Shape expand_shape;
  } depthwise;

  // Depthwise-separable blocks before the op (fusion/ds_chain.cc): a 1x1 convolution that runs
  // them and its own block in one launch (ops/ds_chain.h). blocks[i] is block i's depthwise and
  // 1x1 convolution (the op's own last, its 1x1 null: the op itself), shapes[i] the depthwise's
  // input; input 0 is the first block's input.
  struct DsChain {
    struct Block {
      Op* depthwise = nullptr;
      Op* pointwise = nullptr;
      Shape shape;
    };
    std::vector<Block> blocks;  // empty: none
  } ds_chain;

  // Dense layers before the op (fusion/dense_chain.cc): a FULLY_CONNECTED that runs them and
  // itself in one launch (ops/dense_chain.h). layers[i] is layer i's op with its input's shape,
  // `own` the op's own input's (the last layer's output); input 0 is the first layer's input.
  struct DenseChain {
    struct Layer {
      Op* op = nullptr;
      Shape shape;
    };
    std::vector<Layer> layers;  // empty: none
    Shape own;
  } dense_chain;

  // Per-channel MUL and / or ADD nodes between the op and its input (fusion/affine.cc): input 0
  // is their source, and their parameters follow it as inputs 1 (the MUL's) and 1 or 2 (the
  // ADD's); the op reads x as clamp(clamp(x * scale, lo1, hi1) + shift, lo2, hi2).
  struct Affine {
    bool on = false, scale = false, shift = false;
    float lo1 = 0, hi1 = 0, lo2 = 0, hi2 = 0;
  } affine;

  // A MUL of the op's input by a vector of its channels that the partition computes (a
  // squeeze-and-excitation gate, fusion/gate.cc): input 0 is the MUL's other operand, the gate
  // is input `input`, and the op reads x[..., c] * gate[c]; on int8 tensors each byte as the
  // MUL's kernel computes it, with `quant` (ops/gemm_int8.h's Int8Gate order; empty on float).
  struct Gate {
    bool on = false;
    size_t input = 0;
    std::vector<int> quant;
  } gate;

  // A PAD whose input is now the op's input 0 (fusion/pad.cc), counted as more padding.
  struct Pad {
    bool on = false;
    InputPad pad;
  } pad;

  // A 2x2 max pool of stride 2 after the op (fusion/pool.cc): output 0 is the pool's, and the op
  // writes each window's largest value.
  struct Pool {
    bool on = false;
  } pool;

  // A squeeze after the op (fusion/squeeze_tail.cc): the MEAN (or whole-image AVERAGE_POOL_2D)
  // `op` with its folded dense ops and SOFTMAX, reading the op's output of shape `shape`, runs at
  // the end of the op's launch; output 0 is the squeeze's, and the op's own is never written.
  struct TailSqueeze {
    Op* op = nullptr;  // null: none
    Shape shape;
  } tail_squeeze;

  // Data-movement ops before the op (fusion/gathers.cc), itself one of them: input 0 is the
  // first one's input, and the op writes its output through `stages` (its own first) in one
  // gather.
  struct Chain {
    bool on = false;
    std::vector<IndexStage> stages;
  } chain;

  // A CONCATENATION of the op's output with others (fusion/concat.cc): output 0 is the
  // concatenation's, and the op writes its row m (its output as [M, N], N its last axis) at
  // ldc * m + offset there, so the concatenation copies nothing.
  struct OutSlice {
    bool on = false;
    int ldc = 0;
    int offset = 0;
  } out_slice;

  // A chain of concatenations extended in place (fusion/concat_chain.cc): input 0 is stored as the
  // first values of each row of a wider tensor, rows `ldc` apart (its own shape unchanged; the
  // partition keeps it in that tensor's storage).
  struct InPitch {
    bool on = false;
    int ldc = 0;
  } in_pitch;

  // A QUANTIZE of the op's float output (fusion/requantize.cc): output 0 is the QUANTIZE's, and
  // the op stores its values quantized to `q` as the QUANTIZE would (uint8 or int8).
  struct Quantize {
    bool on = false;
    QuantParams q;
    bool uint8 = false;
  } quantize;
};

}  // namespace clgpu
