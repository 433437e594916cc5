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
#include "ops/attachments.h"
#include "ops/chunker.h"
#include "ops/fold_roles.h"
#include "ops/op_handler.h"
#include "ops/op_parts.h"

namespace clgpu {

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
  // Where the op's output rows go in a folded CONCATENATION's tensor (Attachments::OutSlice;
  // out_ldc 0: none). Only the GEMMs' launches write so (ops/gemm.h); others refuse it.
  int out_ldc = 0, out_offset = 0;
  // The pitch between the rows (pixels) of the op's input 0 when it is the first values of each
  // row of a wider tensor (a concatenation extended in place, fusion/concat_chain.cc; 0:
  // none). Only the GEMMs' A loads read so (kernels/gemm_tiles.cl's A_PITCH, the implicit GEMM's
  // IN_PITCH); others refuse it.
  int in_ldc = 0;

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
  // Activation tensors read from / written to device buffers (weights are private): the op's
  // own, or as this plan's folds rewired them (Attach).
  const std::vector<int>& inputs() const { return att_ ? att_->inputs : inputs_; }
  const std::vector<int>& outputs() const { return att_ ? att_->outputs : outputs_; }

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
  bool KeepsFloat32() const { return keeps_float32_; }

  // true if output 0 is input 0's elements in the same order under another shape
  // (RESHAPE): the partition then copies the buffer itself, piece by piece where a tensor
  // is larger than one buffer, and the op has no launches and never runs in chunks.
  bool IsFlatCopy() const { return flat_copy_; }
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

  // The op's other roles (null: it has none): running in chunks (ops/chunker.h), taking other
  // nodes' work into its kernels and being folded into another op's (ops/fold_roles.h).
  virtual const Chunker* chunker() const { return nullptr; }
  virtual const FoldTarget* fold_target() const { return nullptr; }
  virtual FoldSource* fold_source() { return nullptr; }

  // This plan's folds (ops/attachments.h), read while the op infers shapes and prepares; the
  // partition owns them, fills them before Prepare and replaces them with each plan. Null: none.
  void Attach(const Attachments* a) { att_ = a; }
  // Fresh attachments for a plan: the op's own inputs and outputs, nothing folded.
  Attachments NewAttachments() const;

  // What is attached, for the fold passes' checks and the op's kernels.
  bool has_residual() const { return att().residual.on; }
  const Attachments::Residual& residual() const { return att().residual; }
  bool has_folded_clamp() const { return att().clamp.on; }
  // The bounds the op clamps to: a folded clamp's when one is attached, else its own.
  std::pair<float, float> ClampBounds(float own_lo, float own_hi) const {
    const Attachments::Clamp& c = att().clamp;
    return c.on ? std::make_pair(c.lo, c.hi) : std::make_pair(own_lo, own_hi);
  }
  bool has_epilogue() const { return att().epilogue.kind != 0; }
  // A PRELU of a slope per output channel after the op's activation (fusion/prelu.cc): its
  // slopes are the op's last input.
  bool has_slopes() const { return att().epilogue.kind == kSlopeEpilogue; }
  // Build defines for the op's programs ("" without an epilogue).
  std::string epilogue_defines() const;
  // The folded table (empty: none).
  const std::vector<uint8_t>& epilogue_table() const { return att().epilogue.table; }
  bool has_output_view() const { return att().out_view.on; }
  const std::vector<Op*>& squeeze_dense() const { return att().squeeze; }
  Op* squeeze_softmax() const { return att().squeeze_softmax; }
  Op* folded_depthwise() const { return att().depthwise.op; }
  const Shape& depthwise_shape() const { return att().depthwise.shape; }
  Op* folded_expand() const { return att().depthwise.expand; }
  // The folded depthwise's input shape, input 0 being `in0` now.
  const Shape& DepthwiseInput(const Shape& in0) const {
    return folded_expand() ? att().depthwise.expand_shape : in0;
  }
  // The depthwise-separable blocks it runs (fusion/ds_chain.cc; empty: none).
  const std::vector<Attachments::DsChain::Block>& ds_chain() const { return att().ds_chain.blocks; }
  // The dense layers it runs before its own (fusion/dense_chain.cc; no layers: none).
  const Attachments::DenseChain& dense_chain() const { return att().dense_chain; }
  const InputPad* folded_pad() const { return att().pad.on ? &att().pad.pad : nullptr; }
  const Attachments::Affine* input_affine() const {
    return att().affine.on ? &att().affine : nullptr;
  }
  bool has_gate() const { return att().gate.on; }
  bool has_pool() const { return att().pool.on; }
  Op* tail_squeeze() const { return att().tail_squeeze.op; }
  const Shape& tail_squeeze_shape() const { return att().tail_squeeze.shape; }
  // A QUANTIZE of the op's output (fusion/requantize.cc; null: none).
  const Attachments::Quantize* output_quantize() const {
    return att().quantize.on ? &att().quantize : nullptr;
  }
  // The CONCATENATION the op writes its output into (null: none).
  const Attachments::OutSlice* output_slice() const {
    return att().out_slice.on ? &att().out_slice : nullptr;
  }
  // Input 0's row pitch in the wider tensor holding it (Attachments::InPitch); 0: none.
  int input_pitch() const { return att().in_pitch.on ? att().in_pitch.ldc : 0; }
  size_t gate_input() const { return att().gate.input; }
  const std::vector<int>& gate_quant() const { return att().gate.quant; }
  bool chained() const { return att().chain.on; }

  // The op's output 0 as one index stage over its input 0 for these shapes (ops/index_chain.h),
  // or false: what lets it join a chain of data-movement ops (fusion/gathers.cc). A flat copy
  // is the identity.
  virtual bool IndexStageOf(const Shape& in, const Shape& out, IndexStage* stage) const {
    (void)in, (void)out;
    if (!IsFlatCopy()) return false;
    *stage = IndexStage{};
    return true;
  }

  const std::vector<Launch>& launches() const { return launches_; }
  // Run-time indices the op reads (GATHER, EMBEDDING_LOOKUP): int32 tensor `tensor`, each value
  // in [0, extent). Such a tensor is a partition input, or one through flat copies alone
  // (delegate/claim.h), which the partition checks on the host before each upload, failing the
  // invoke as TFLite's kernel does.
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
  // A chunk's constructor: the chunk applies the residual ADD and the clamp folded into `whole`
  // as `whole` does, from `kept`, a member of the chunk that gets their copies.
  void KeepChunkFolds(const Op& whole, Attachments* kept) {
    kept->residual = whole.att().residual;
    kept->clamp = whole.att().clamp;
    Attach(kept);
  }
  std::vector<Launch> launches_;
  // The views folded in this plan (null: the operand or output as it is).
  const StridedView* input_view(size_t i) const {
    const std::vector<Attachments::View>& v = att().in_views;
    return i < v.size() && v[i].on ? &v[i].view : nullptr;
  }
  const StridedView* output_view() const {
    return att().out_view.on ? &att().out_view.view : nullptr;
  }
  float output_scale() const { return att().out_view.on ? att().out_view.scale : 1.0f; }
  // With a chain attached, its one gather launch, writing `out_shape`, in place of the op's own
  // (the ops that take chains call it first; false: none attached).
  bool PrepareChain(OpContext& ctx, const Shape& out_shape, const std::vector<cl_mem>& in,
                    const std::vector<cl_mem>& out);
  std::vector<IndexInput> index_inputs_;  // set by the op's Prepare
  // Facts of the op's kind, set by its constructor (KeepsFloat32, IsFlatCopy).
  bool keeps_float32_ = false;
  bool flat_copy_ = false;

 private:
  Buffer chain_meta_;
  const Attachments& att() const {
    static const Attachments none;
    return att_ ? *att_ : none;
  }
  int node_index_;
  std::vector<int> inputs_, outputs_;
  const Attachments* att_ = nullptr;
};

}  // namespace clgpu

// The helpers shared by the op files (kernel arguments, uploads).
#include "ops/op_helpers.h"
