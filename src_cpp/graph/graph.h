// A read-only view of the TFLite graph used while claiming nodes (delegate
// Prepare) and while building a partition (kernel init): node records, tensor
// shapes, and constant data, including weights stored as FLOAT16 constants behind
// a DEQUANTIZE node, which we fold into constants.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "graph/quant.h"
#include "tflite/abi.h"

namespace clgpu {

using Shape = std::vector<int>;

int64_t NumElements(const Shape& s);
std::string ShapeString(const Shape& s);

// A tensor's dims as a Shape ({} when it has none).
Shape TensorShape(const TfLiteTensor& x);

struct NodeInfo {
  int index = -1;
  int32_t op = -1;  // builtin code
  int version = 0;
  std::vector<int> inputs, outputs;  // tensor indices, -1 = absent optional input
  const void* builtin_data = nullptr;
};

class GraphView {
 public:
  explicit GraphView(TfLiteContext* ctx) : ctx_(ctx) {}

  TfLiteContext* context() const { return ctx_; }
  bool valid_tensor(int t) const { return t >= 0 && static_cast<size_t>(t) < ctx_->tensors_size; }
  const TfLiteTensor& tensor(int t) const { return ctx_->tensors[t]; }
  Shape shape(int t) const;
  TfLiteType type(int t) const {
    auto it = retyped_.find(t);
    return it != retyped_.end() ? it->second : tensor(t).type;
  }
  std::string name(int t) const;
  // The element type a partition would hold the tensor as (a folded DEQUANTIZE's output is a
  // float constant).
  ValueType value_type(int t) const;
  // Its quantization (graph/quant.h; empty when it has none).
  QuantParams quant(int t) const { return ReadQuantParams(tensor(t)); }
  // The rounding of the host runtime's int8 kernels, set once per Prepare by the delegate.
  const CpuKernels& cpu_kernels() const { return cpu_kernels_; }
  void set_cpu_kernels(CpuKernels k) { cpu_kernels_ = std::move(k); }

  // Constant = model data that lives on the CPU (mmap'ed or persistent
  // read-only), a computed constant, or the output of a DEQUANTIZE of a FLOAT16 one.
  bool IsConstant(int t) const;
  // Model data alone (mmap'ed or persistent read-only, written by no node): what a CPU kernel
  // can read at Prepare, before TFLite allocates anything.
  bool IsModelConstant(int t) const;
  // Constant as float32 (float16 sources are widened, int8 / uint8 ones dequantized,
  // graph/dequantize.h). Throws Error otherwise.
  std::vector<float> ConstantFloats(int t) const;
  // Float32 model data as TFLite holds it (memory-mapped, kept for the interpreter's life), or
  // nullptr for any other constant (float16, folded, computed, persistent).
  const float* ModelFloat32(int t) const;
  // The same for float16 model data: t itself, or the source of t's folded DEQUANTIZE.
  const uint16_t* ModelFloat16(int t) const;
  // The same for int8 / uint8 model data read as float (t a dequantized weight or a folded
  // DEQUANTIZE's output) with its source's quantization and shape, checked
  // (graph/dequantize.h); nullptr for any other.
  const void* ModelQuantized(int t, ValueType* type, QuantParams* q, Shape* s) const;
  // A constant's bytes as TFLite holds them (int8 / uint8 / int32 data). Throws Error otherwise.
  std::vector<uint8_t> ConstantBytes(int t) const;
  // Constant int32 / int64 tensor as int64 values (permutations, shapes).
  std::vector<int64_t> ConstantInts(int t) const;
  // The same for an op's parameter input, or why it cannot be used ("" when *out is set):
  // missing, computed at run time (the op's output would be dynamic), or not integers.
  // `what` names the input in the reason.
  std::string ReadConstantInts(int t, const std::string& what, std::vector<int64_t>* out) const;

  // Records a DEQUANTIZE node `out = dequantize(src)` whose source is a constant
  // FLOAT16, int8 or uint8 tensor; its output then counts as a float constant.
  void AddFoldedDequantize(int out, int src) {
    folded_[out] = src;
    folded_sources_.insert(src);
  }
  bool IsFoldedDequantizeOutput(int t) const { return folded_.count(t) != 0; }
  // Whether t is the source of one (the interpreter reads its dequantized copy at each invoke).
  bool IsFoldedDequantizeSource(int t) const { return folded_sources_.count(t) != 0; }

  // Records an int8 constant that a dynamic-range ("hybrid") op reads as its weights
  // (ops/hybrid_weights.h): it is then a float constant, its dequantized values.
  void AddDequantizedWeight(int t) { dequantized_.insert(t); }
  bool IsDequantizedWeight(int t) const { return dequantized_.count(t) != 0; }

  // A constant computed at Prepare (a DENSIFY of a sparse constant, graph/sparse.h): its float
  // values; it counts as a constant, also as the source of a folded DEQUANTIZE.
  void AddComputedConstant(int t, std::vector<float> values) { computed_[t] = std::move(values); }
  bool IsComputedConstant(int t) const { return computed_.count(t) != 0; }

  // An integer tensor the model computes from tensor shapes and constants, evaluated at Prepare
  // (ops/shape_folding.h). from[i]: the tensor and axis whose extent element i is (it may change
  // with resize_tensor_input), or {-1, -1} for a constant. Not IsConstant: only readers that
  // handle such elements (RESHAPE's target) use it.
  struct DimSource {
    int tensor = -1, axis = -1;  // exactly this tensor's extent along this axis (-1: not one)
    // Otherwise, when not empty: coef x the product of these (tensor, axis) extents (a
    // REDUCE_PROD of shape elements), tensor -1.
    std::vector<std::pair<int, int>> product;
    int64_t coef = 1;
    bool derived() const { return tensor >= 0 || !product.empty(); }
  };
  struct FoldedInts {
    std::vector<int64_t> values;
    std::vector<DimSource> from;
  };
  void AddFoldedInts(int t, FoldedInts v) { folded_ints_[t] = std::move(v); }
  const FoldedInts* FoldedIntsOf(int t) const {
    auto it = folded_ints_.find(t);
    return it == folded_ints_.end() ? nullptr : &it->second;
  }

  // The shape a tensor has at Prepare when the model's declared one is stale: a RESHAPE whose
  // target is folded (its declared output has 1s for the converter's -1s) and what follows it
  // (ops/shape_folding.h). shape() returns it.
  void SetInferredShape(int t, Shape s) { inferred_[t] = std::move(s); }

  // The type a tensor has at Prepare when a CPU kernel sets it from its input, whatever the
  // model declares (graph/validate.h, InferCpuOutputTypes). type() returns it.
  void SetInferredType(int t, TfLiteType type) { retyped_[t] = type; }

  // The tensors some node writes: never constants, whatever data the model also gives them
  // (TFLite's kernels overwrite it; reading it as a weight gave other outputs than the CPU's).
  void SetWritten(std::set<int> written) { written_ = std::move(written); }

 private:
  TfLiteContext* ctx_;
  CpuKernels cpu_kernels_;
  std::map<int, int> folded_;
  std::set<int> folded_sources_;  // their sources
  std::map<int, std::vector<float>> computed_;
  std::map<int, FoldedInts> folded_ints_;
  std::map<int, Shape> inferred_;
  std::map<int, TfLiteType> retyped_;
  std::set<int> dequantized_;
  std::set<int> written_;
};

// A float constant's values read when first needed: float32 model data is copied (float16
// widened, int8 / uint8 dequantized) then, at the op's prepare (on the setup thread under
// cpu_warmup) instead of at kernel init, where hundreds of MB of weights would hold the
// interpreter's start; any other constant is read at once. values() from one thread at a time (the
// one preparing the op).
class LazyConstant {
 public:
  LazyConstant() = default;
  LazyConstant(const GraphView& g, int t);
  const std::vector<float>& values();

 private:
  const float* model_ = nullptr;
  const uint16_t* half_ = nullptr;
  const void* quantized_ = nullptr;  // int8 / uint8 model data, dequantized by quant_
  ValueType quantized_type_ = ValueType::kInt8;
  QuantParams quant_;
  Shape shape_;
  size_t n_ = 0;
  std::vector<float> values_;
};

// Copies what we need of a node (valid only during delegate Prepare / kernel init).
NodeInfo ReadNode(TfLiteContext* ctx, int node_index, bool* ok);

// Activation clamp bounds of a TFLite fused activation; false if not a clamp. NONE is
// [-FLT_MAX, FLT_MAX]: the CPU kernels of ops with a fused activation bound +-Inf there too.
bool ActivationRange(int activation, float* lo, float* hi);
// [-Inf, Inf]: the bounds of an op whose CPU kernel applies no clamp (MAXIMUM, POW,
// CONCATENATION, RELU's upper side, ...), so +-Inf passes through as it does there.
void Unbounded(float* lo, float* hi);

}  // namespace clgpu
