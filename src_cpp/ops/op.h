// The contract of one op family: a "can I run this node?" check, and an Op object
// that infers shapes, uploads its weights once and records its kernel launches.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cl/environment.h"
#include "graph/graph.h"
#include "ops/epilogue.h"
#include "ops/op_parts.h"
#include "ops/op_handler.h"

namespace clgpu {

struct Int8Dense;        // ops/squeeze.h
struct FloatDense;       // ops/squeeze.h
struct Int8DepthwiseA;   // ops/gemm_int8.h
struct FloatDepthwiseA;  // ops/conv2d_selector.h

// What a MEAN runs of the dense ops after it (Op::TakesSqueeze).
enum class SqueezeType { kNone, kInt8, kFloat };

// The options ops read (forced choices for tests and benchmarks).
struct OpOptions {
  std::string conv_algorithm = "auto";
  int gemm_splits = 0;  // 0: each GEMM decides
};

// What an op may use while preparing: the device, the queue for weight uploads,
// the options it reads and the build defines the precision implies.
struct OpContext {
  OpContext(Environment& e, cl_command_queue q, OpOptions o)
      : env(e), queue(q), options(std::move(o)) {}
  Environment& env;
  cl_command_queue queue;
  OpOptions options;
  std::string storage_defines;  // "" for fp32, "-DSTORAGE_HALF" for fp16 storage
  size_t storage_bytes = 4;     // bytes per activation/weight element on the device
  // The type of the op's activations: kFloat (the partition's float storage), or int8 / uint8
  // for an op whose values all are (ForValues).
  ValueType values = ValueType::kFloat;
  size_t float_bytes = 4;       // the partition's float storage, whatever `values` is
  BinaryCache* disk = nullptr;  // serialization_dir, when set
  size_t max_alloc = 0;         // largest single buffer (device limit or max_alloc_bytes)
  // Partition-wide scratch buffers, shared by all ops (they run one after another),
  // sized to the largest ScratchBytes() request per slot.
  std::vector<cl_mem> scratch = {};
  // Ops preparing on threads that take turns (runtime/build_threads.h): the turn this
  // thread holds, let go while a program builds. Null: preparing alone.
  std::mutex* turn = nullptr;

  // This context for an op whose activations are all of type `t`: int8 / uint8 programs build
  // with -DSTORAGE_INT8 / -DSTORAGE_UINT8 (kernels/common.cl: T is the integer type, loads are
  // exact floats) and an element is 1 byte. kFloat: the partition's float storage.
  OpContext ForValues(ValueType t) const;
  // This context with float32 storage (a partition whose values left fp16's range).
  OpContext WithFloat32Storage() const;
  // Device bytes of one element of type `t` (kFloat: the float storage).
  size_t ElementBytes(ValueType t) const {
    return t == ValueType::kFloat ? float_bytes : HostElementBytes(t);
  }
  // Whether the op's float values are float32 on the device.
  bool float32() const { return values == ValueType::kFloat32 || float_bytes == 4; }

  // kernels/<file>.cl built for this context's storage type (cached).
  std::shared_ptr<Program> GetProgram(const std::string& file, const std::string& extra = "") {
    return env.programs().Get(file, storage_defines + (extra.empty() ? "" : " " + extra), disk,
                              turn);
  }
};

class Op {
 public:
  Op(const NodeInfo& node, std::vector<int> inputs, std::vector<int> outputs)
      : node_index_(node.index), inputs_(std::move(inputs)), outputs_(std::move(outputs)) {}
  virtual ~Op() = default;

  virtual const char* type_name() const = 0;  // "CONV_2D"
  virtual std::string algorithm() const { return "generic"; }
  int node_index() const { return node_index_; }
  // Activation tensors read from / written to device buffers (weights are private).
  const std::vector<int>& inputs() const { return inputs_; }
  const std::vector<int>& outputs() const { return outputs_; }

  // Output shapes for these input shapes; throws Error if they are invalid.
  virtual std::vector<Shape> InferShapes(const std::vector<Shape>& in) const = 0;
  // Tensors whose shapes (not data) the output shapes also follow: a RESHAPE target folded from
  // other tensors' extents (ops/shape_folding.h). InferShapes gets their shapes after the inputs'.
  virtual std::vector<int> ShapeInputs() const { return {}; }
  // (Re)creates the launches for these shapes and buffers. Weights are uploaded
  // on the first call only.
  virtual void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes,
                       const std::vector<Shape>& out_shapes, const std::vector<cl_mem>& in,
                       const std::vector<cl_mem>& out) = 0;
  // Work estimate for profiles and the cost model.
  virtual double Flops(const std::vector<Shape>& in, const std::vector<Shape>& out) const = 0;

  // Scratch the op needs for these input shapes, per slot (see OpContext::scratch).
  virtual std::vector<size_t> ScratchBytes(const OpContext&, const std::vector<Shape>&) const {
    return {};
  }

  // Bytes of weights the op reads per run (profiles, cost model).
  virtual double WeightBytes() const { return 0; }

  // true if the op reads and writes float values only at a quantization boundary (QUANTIZE's
  // input, DEQUANTIZE's output): a float value that only such ops touch stays float32 on the
  // device under fp16 storage (ValueType::kFloat32), so its integers match the CPU's.
  virtual bool KeepsFloat32() const { return false; }

  // true if output 0 is input 0's elements in the same order under another shape
  // (RESHAPE): the partition then copies the buffer itself, piece by piece where a tensor
  // is larger than one buffer, and the op has no launches and never runs in chunks.
  virtual bool IsFlatCopy() const { return false; }
  // The same for ops whose every output j is a contiguous range of input 0, elements
  // [(*first)[j], (*first)[j] + its size) in order, for these input shapes (a SLICE of whole
  // outer rows, an UNPACK along the outermost axis): the partition copies each range itself.
  // The default is IsFlatCopy()'s one range from 0.
  virtual bool FlatRanges(const std::vector<Shape>& in, std::vector<size_t>* first) const {
    (void)in;
    if (!IsFlatCopy()) return false;
    first->assign(1, 0);
    return true;
  }

  // --- Chunks (runtime/split.h): the op as a sequence of sub-ops, each computing
  // one box of the output from copies of the input boxes it reads. ---

  // false if the op cannot run in chunks.
  virtual bool GetChunkSpec(const std::vector<Shape>& in, ChunkSpec* spec) const {
    (void)in, (void)spec;
    return false;
  }
  // The box of each input (in spec.views) that the chunk computing `out` reads.
  virtual std::vector<Box> ChunkInputs(const std::vector<Shape>& in, const Box& out) const {
    (void)in, (void)out;
    return {};
  }
  // Bytes of the largest weight buffer the chunk computing `out` uploads.
  virtual size_t ChunkWeightBytes(const OpContext& ctx, const std::vector<Shape>& in,
                                  const Box& out) const {
    (void)ctx, (void)in, (void)out;
    return 0;
  }
  // An op computing exactly `out` from buffers holding exactly the ChunkInputs boxes
  // (input shapes = their sizes). It shares this op's weights: it must not outlive it.
  virtual std::unique_ptr<Op> MakeChunk(const std::vector<Shape>& in, const Box& out) const {
    (void)in, (void)out;
    return nullptr;
  }

  // --- A residual ADD folded into the op that produces one of its operands (fusion/residual.cc):
  // the producer reads the ADD's other operand as one more, last input laid out like its
  // output, and writes act(its result + that operand) to the ADD's output with the ADD's
  // activation; the ADD runs nothing. ---

  // An ADD that may be folded, `residual` its operand that the producer reads: true, with what
  // the producer then applies.
  virtual bool IsResidualAdd(int residual, ResidualAdd* add) const {
    (void)residual, (void)add;
    return false;
  }
  // Whether this op can take a residual for these input shapes (its own inputs, unfused).
  virtual bool CanFuseResidual(const OpContext& ctx, const std::vector<Shape>& in) const {
    (void)ctx, (void)in;
    return false;
  }
  // Folds an ADD in (after CanFuseResidual): `residual` becomes the last input and `output`
  // the only output. UnfuseResidual restores the op's own inputs and output.
  void FuseResidual(int residual, int output, const ResidualAdd& add);
  void UnfuseResidual();
  bool has_residual() const { return residual_.on; }

  // --- A clamp activation (RELU, RELU6, RELU_N1_TO_1, RELU_0_TO_1) folded into the op that
  // produces its input (fusion/clamp.cc): the op clamps with both bounds and writes the activation's
  // output; the activation runs nothing. Ops that clamp in their store override these two. ---

  // The op's own clamp bounds; false if it applies none.
  virtual bool GetClamp(float* lo, float* hi) const {
    (void)lo, (void)hi;
    return false;
  }
  virtual void SetClamp(float lo, float hi) { (void)lo, (void)hi; }
  // Folds the clamp [lo, hi] in, writing `output`; false (nothing changed) if the op applies no
  // clamp, already folds one, has a residual, or the bounds do not overlap.
  bool FoldClamp(int output, float lo, float hi);
  void UnfoldClamp();
  bool has_folded_clamp() const { return clamp_.on; }

  // --- An element-wise op (or swish's LOGISTIC + MUL) folded into the op producing its input
  // (fusion/epilogue.cc): the op's kernels apply it after their clamp (kernels/common.cl, EPILOGUE) and
  // write `output`; the folded nodes run nothing. Only ops that clamp in their store
  // (OpHandler::clamp_epilogue) take one. ---
  bool FoldEpilogue(int output, int kind, float alpha, std::vector<PostClamp> post = {});
  // The int8 form: the chain's 256 results as a table (OutputStage::table) applied to the
  // requantized integers; only ops whose TakesTable() is true (the int8 GEMMs and convolutions).
  bool FoldTable(int output, std::vector<uint8_t> table);
  virtual bool TakesTable() const { return false; }
  void UnfoldEpilogue();
  bool has_epilogue() const { return epilogue_.kind != 0; }
  // Build defines for the op's programs ("" without an epilogue).
  std::string epilogue_defines() const;
  // The folded table (empty: none).
  const std::vector<uint8_t>& epilogue_table() const { return epilogue_.table; }

  // --- Views (ops/matmul_views.h): a chain of TRANSPOSE / RESHAPE (and a scale) between an
  // operand and the tensor it comes from, or between the output and the tensor it ends in, read or
  // written in place through strides; the chain's nodes run nothing. Only ops overriding
  // TakesViews() take them. ---
  virtual bool TakesViews() const { return false; }
  // Operand `i` becomes `source`, seen through `view` (shaped like the operand).
  void FoldInputView(size_t i, int source, StridedView view);
  // Output 0 becomes `output`, which holds it as `view` (shaped like the op's own output), times
  // `scale`.
  void FoldOutputView(int output, StridedView view, float scale);
  void UnfoldViews();
  bool has_output_view() const { return out_view_.on; }

  // --- A squeeze (ops/squeeze.h): a MEAN over the H and W of one image, then one or two dense
  // ops on its vector (squeeze-and-excitation's pool, reduce and expand), all run by the MEAN op
  // in one launch; the dense ops (and RESHAPEs between) run nothing. ---

  // The int8 form of this op applied to one row of an input of shape `in` (FULLY_CONNECTED, a
  // CONV_2D of a 1x1 filter over a 1x1 image), its weights uploaded; false for other ops, shapes
  // and folds (a residual, views).
  virtual bool GetInt8Dense(OpContext& ctx, const Shape& in, Int8Dense* dense) {
    (void)ctx, (void)in, (void)dense;
    return false;
  }
  // The same on float values (the context's float storage), its clamp and epilogue included.
  virtual bool GetFloatDense(OpContext& ctx, const Shape& in, FloatDense* dense) {
    (void)ctx, (void)in, (void)dense;
    return false;
  }
  // Which dense ops this op runs after it, for an input of shape `in` (kNone: none).
  virtual SqueezeType TakesSqueeze(const Shape& in) const {
    (void)in;
    return SqueezeType::kNone;
  }
  // Folds the dense ops in (after TakesSqueeze): output 0 becomes `output`, the last one's.
  // The ops must outlive the fold. UnfoldSqueeze restores the op's own output.
  void FoldSqueeze(std::vector<Op*> dense, int output);
  void UnfoldSqueeze();
  const std::vector<Op*>& squeeze_dense() const { return squeeze_.dense; }

  // --- A depthwise convolution folded into the pointwise one reading its output (the GEMM's A
  // computed from the depthwise's input, ops/gemm_int8.h): one launch for the pair. ---

  // The int8 form of this op over an input of shape `in`, its weights uploaded; false for other
  // ops, shapes (depth multiplier 1, C % 4 == 0) and folds.
  virtual bool GetInt8Depthwise(OpContext& ctx, const Shape& in, Int8DepthwiseA* dw) {
    (void)ctx, (void)in, (void)dw;
    return false;
  }
  // The same on float values (depth multiplier 1, its clamp, no epilogue).
  virtual bool GetFloatDepthwise(OpContext& ctx, const Shape& in, FloatDepthwiseA* dw) {
    (void)ctx, (void)in, (void)dw;
    return false;
  }
  // Whether this op can compute its input 0 as a depthwise's output, for these input shapes.
  virtual bool TakesDepthwise(const OpContext& ctx, const std::vector<Shape>& in) const {
    (void)ctx, (void)in;
    return false;
  }
  // Folds `dw` in (after TakesDepthwise): input 0 becomes dw's input, `shape` that of dw's output
  // (the op's own input, now never written). The op must outlive the fold.
  void FoldDepthwise(Op* dw, int input, Shape shape);
  void UnfoldDepthwise();
  Op* folded_depthwise() const { return depthwise_.op; }
  const Shape& depthwise_shape() const { return depthwise_.shape; }
  // Folds, after FoldDepthwise, the 1x1 convolution `ex` computing the depthwise's input (the
  // expand of an inverted-residual block; its GetFloatDense / GetInt8Dense per pixel): input 0
  // becomes ex's input, `shape` that of ex's output (the depthwise's input, never written).
  // UnfoldDepthwise undoes both.
  void FoldExpand(Op* ex, int input, Shape shape);
  Op* folded_expand() const { return depthwise_.expand; }
  // The folded depthwise's input shape, input 0 being `in0` now.
  const Shape& DepthwiseInput(const Shape& in0) const {
    return depthwise_.expand ? depthwise_.expand_shape : in0;
  }

  // --- A PAD before a convolution (fusion/pad.cc): the op reads the PAD's input and its
  // geometry counts the PAD's rows and columns as padding (ConvGeometry::Compute). ---
  void FoldPad(int input, InputPad pad);
  void UnfoldPad();
  const InputPad* folded_pad() const { return pad_.on ? &pad_.pad : nullptr; }

  const std::vector<Launch>& launches() const { return launches_; }
  // Run-time indices the op reads (GATHER, EMBEDDING_LOOKUP): int32 tensor `tensor`, each value
  // in [0, extent). Such a tensor is a partition input (no claimed op writes int32), which the
  // partition checks on the host before each upload, failing the invoke as TFLite's kernel does.
  struct IndexInput {
    int tensor;
    int64_t extent;
    std::string what;  // the error's start: "GATHER", "Embedding Lookup"
  };
  const std::vector<IndexInput>& index_inputs() const { return index_inputs_; }
  // Drops the kernels (and their references to buffers) before the buffers they
  // use are replaced: NVIDIA's driver crashed releasing a kernel whose argument
  // buffer had already been released.
  void ClearLaunches() { launches_.clear(); }

 protected:
  // A chunk of another op: it reads and writes staging buffers, not graph tensors.
  explicit Op(int node_index) : node_index_(node_index) {}
  std::vector<Launch> launches_;
  // The views folded in this plan (null: the operand or output as it is).
  const StridedView* input_view(size_t i) const {
    return i < in_views_.size() && in_views_[i].on ? &in_views_[i].view : nullptr;
  }
  const StridedView* output_view() const { return out_view_.on ? &out_view_.view : nullptr; }
  float output_scale() const { return out_view_.on ? out_view_.scale : 1.0f; }
  // A folded ADD: its clamp bounds replace the op's own (which are none). Chunks copy it.
  struct Residual {
    bool on = false;
    float act_min = 0, act_max = 0;
    std::vector<int> quant;
  };
  Residual residual_;
  std::vector<IndexInput> index_inputs_;  // set by the op's Prepare

 private:
  int node_index_;
  std::vector<int> inputs_, outputs_;
  int own_output_ = -1;  // output 0 while a residual ADD is folded in
  struct ClampFold {
    bool on = false;
    float lo = 0, hi = 0;  // the op's own bounds, restored by UnfoldClamp
    int own_output = -1;
  };
  ClampFold clamp_;
  struct Epilogue {
    int kind = 0;  // 0: none
    float alpha = 0;
    int own_output = -1;
    std::vector<uint8_t> table;  // kind kTableEpilogue
    std::vector<PostClamp> post;
  };
  Epilogue epilogue_;
  struct ViewFold {
    bool on = false;
    int own_tensor = -1;
    StridedView view;
    float scale = 1.0f;
  };
  std::vector<ViewFold> in_views_;
  ViewFold out_view_;
  struct SqueezeFold {
    std::vector<Op*> dense;  // empty: none
    int own_output = -1;
  };
  SqueezeFold squeeze_;
  struct DepthwiseFold {
    Op* op = nullptr;  // null: none
    int own_input = -1;
    Shape shape;
    Op* expand = nullptr;  // null: none (FoldExpand)
    int dw_input = -1;     // the depthwise's own input, restored by UnfoldDepthwise
    Shape expand_shape;
  };
  DepthwiseFold depthwise_;
  struct PadFold {
    bool on = false;
    int own_input = -1;
    InputPad pad;
  };
  PadFold pad_;
};

}  // namespace clgpu

// The helpers shared by the op files (kernel arguments, uploads).
#include "ops/op_helpers.h"
