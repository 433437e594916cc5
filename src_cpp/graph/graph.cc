#include "graph/graph.h"

#include <cstring>
#include <limits>

#include "common/error.h"
#include "common/half.h"
#include "graph/dequantize.h"

namespace clgpu {

int64_t NumElements(const Shape& s) {
  int64_t n = 1;
  for (int d : s) n *= d;
  return n;
}

std::string ShapeString(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

Shape TensorShape(const TfLiteTensor& x) {
  return x.dims ? Shape(x.dims->data, x.dims->data + x.dims->size) : Shape{};
}

Shape GraphView::shape(int t) const {
  if (auto it = inferred_.find(t); it != inferred_.end()) return it->second;
  if (!valid_tensor(t)) throw Error("tensor index " + std::to_string(t) + " is invalid");
  return TensorShape(tensor(t));
}

std::string GraphView::name(int t) const {
  const char* n = tensor(t).name;
  return n ? n : "#" + std::to_string(t);
}

ValueType GraphView::value_type(int t) const {
  return IsFoldedDequantizeOutput(t) || IsDequantizedWeight(t) ? ValueType::kFloat
                                                               : ValueTypeOf(type(t));
}

bool GraphView::IsModelConstant(int t) const {
  if (!valid_tensor(t) || written_.count(t)) return false;
  const TfLiteTensor& x = tensor(t);
  return (x.allocation_type == kTfLiteMmapRo || x.allocation_type == kTfLitePersistentRo) &&
         x.data.raw != nullptr;
}

bool GraphView::IsConstant(int t) const {
  if (auto it = folded_.find(t); it != folded_.end()) t = it->second;
  return computed_.count(t) != 0 || IsModelConstant(t);
}

std::vector<float> GraphView::ConstantFloats(int t) const {
  int src = t;
  if (auto it = folded_.find(t); it != folded_.end()) src = it->second;
  if (auto it = computed_.find(src); it != computed_.end()) return it->second;
  if (!IsModelConstant(src)) throw Error("tensor " + name(t) + " is not constant");
  const TfLiteTensor& x = tensor(src);
  const int64_t n = NumElements(shape(src));
  if (x.type == kTfLiteFloat32 && x.bytes >= static_cast<size_t>(n) * 4) {
    // Copied as it is allocated: no zero-fill pass over weights of up to hundreds of MB.
    const auto* f = static_cast<const float*>(x.data.raw_const);
    return std::vector<float>(f, f + n);
  }
  std::vector<float> out(static_cast<size_t>(n));
  if (x.type == kTfLiteFloat16 && x.bytes >= static_cast<size_t>(n) * 2) {
    const auto* h = static_cast<const uint16_t*>(x.data.raw_const);
    for (int64_t i = 0; i < n; ++i) out[i] = HalfToFloat(h[i]);
  } else if (IsQuantized(ValueTypeOf(x.type))) {
    const Shape s = shape(src);
    if (auto why = CheckDequantizable(x, s, name(src)); !why.empty()) throw Error(why);
    DequantizeInto(x.data.raw_const, ValueTypeOf(x.type), s, ReadQuantParams(x), out.data());
  } else {
    throw Error("tensor " + name(t) + " is not a float constant");
  }
  return out;
}

const float* GraphView::ModelFloat32(int t) const {
  if (folded_.count(t) || computed_.count(t) || !IsModelConstant(t)) return nullptr;
  const TfLiteTensor& x = tensor(t);
  const int64_t n = NumElements(shape(t));
  if (x.allocation_type != kTfLiteMmapRo || x.type != kTfLiteFloat32 || x.sparsity ||
      x.bytes < static_cast<size_t>(n) * 4)
    return nullptr;
  return static_cast<const float*>(x.data.raw_const);
}

const uint16_t* GraphView::ModelFloat16(int t) const {
  int src = t;
  if (auto it = folded_.find(t); it != folded_.end()) src = it->second;
  if (computed_.count(src) || !IsModelConstant(src)) return nullptr;
  const TfLiteTensor& x = tensor(src);
  const int64_t n = NumElements(shape(src));
  if (x.allocation_type != kTfLiteMmapRo || x.type != kTfLiteFloat16 || x.sparsity ||
      x.bytes < static_cast<size_t>(n) * 2 || n != NumElements(shape(t)))
    return nullptr;
  return static_cast<const uint16_t*>(x.data.raw_const);
}

const void* GraphView::ModelQuantized(int t, ValueType* type, QuantParams* q, Shape* s) const {
  int src = t;
  if (auto it = folded_.find(t); it != folded_.end()) src = it->second;
  if (!(folded_.count(t) || dequantized_.count(t)) || computed_.count(src) || !IsModelConstant(src))
    return nullptr;
  const TfLiteTensor& x = tensor(src);
  *s = shape(src);
  // Read later, at the op's prepare: only model data, which lives as long as the interpreter.
  if (x.allocation_type != kTfLiteMmapRo || NumElements(*s) != NumElements(shape(t)) ||
      !CheckDequantizable(x, *s, name(src)).empty())
    return nullptr;
  *type = ValueTypeOf(x.type);
  *q = ReadQuantParams(x);
  return x.data.raw_const;
}

LazyConstant::LazyConstant(const GraphView& g, int t)
    : model_(g.ModelFloat32(t)), half_(model_ ? nullptr : g.ModelFloat16(t)) {
  if (!model_ && !half_) quantized_ = g.ModelQuantized(t, &quantized_type_, &quant_, &shape_);
  if (model_ || half_ || quantized_) {
    n_ = static_cast<size_t>(NumElements(g.shape(t)));
  } else {
    values_ = g.ConstantFloats(t);
  }
}

const std::vector<float>& LazyConstant::values() {
  if (model_) {
    values_.assign(model_, model_ + n_);
    model_ = nullptr;
  } else if (half_) {
    values_.resize(n_);
    for (size_t i = 0; i < n_; ++i) values_[i] = HalfToFloat(half_[i]);
    half_ = nullptr;
  } else if (quantized_) {
    values_.resize(n_);
    DequantizeInto(quantized_, quantized_type_, shape_, quant_, values_.data());
    quantized_ = nullptr;
  }
  return values_;
}

std::vector<uint8_t> GraphView::ConstantBytes(int t) const {
  if (!IsModelConstant(t)) throw Error("tensor " + name(t) + " is not constant");
  const TfLiteTensor& x = tensor(t);
  const ValueType vt = ValueTypeOf(x.type);
  const size_t n = static_cast<size_t>(NumElements(shape(t))) * HostElementBytes(vt);
  if (vt == ValueType::kUnsupported || vt == ValueType::kFloat || x.bytes < n)
    throw Error("tensor " + name(t) + " is not an integer constant");
  const auto* p = static_cast<const uint8_t*>(x.data.raw_const);
  return std::vector<uint8_t>(p, p + n);
}

std::vector<int64_t> GraphView::ConstantInts(int t) const {
  if (!IsModelConstant(t)) throw Error("tensor " + name(t) + " is not constant");
  const TfLiteTensor& x = tensor(t);
  const int64_t n = NumElements(shape(t));
  std::vector<int64_t> out(static_cast<size_t>(n));
  if (x.type == kTfLiteInt32 && x.bytes >= static_cast<size_t>(n) * 4) {
    const auto* p = static_cast<const int32_t*>(x.data.raw_const);
    for (int64_t i = 0; i < n; ++i) out[i] = p[i];
  } else if (x.type == kTfLiteInt64 && x.bytes >= static_cast<size_t>(n) * 8) {
    const auto* p = static_cast<const int64_t*>(x.data.raw_const);
    for (int64_t i = 0; i < n; ++i) out[i] = p[i];
  } else {
    throw Error("tensor " + name(t) + " is not an integer constant");
  }
  return out;
}

std::string GraphView::ReadConstantInts(int t, const std::string& what,
                                        std::vector<int64_t>* out) const {
  if (!valid_tensor(t)) return what + " input is missing";
  if (!IsConstant(t))
    return what + " is not a constant tensor (computed at run time, not constant model data)";
  try {
    *out = ConstantInts(t);
  } catch (const Error& e) {
    return what + ": " + What(e);
  }
  return "";
}

NodeInfo ReadNode(TfLiteContext* ctx, int node_index, bool* ok) {
  NodeInfo info;
  TfLiteNode* node = nullptr;
  TfLiteRegistration* reg = nullptr;
  *ok = ctx->GetNodeAndRegistration(ctx, node_index, &node, &reg) == kTfLiteOk && node && reg;
  if (!*ok) return info;
  info.index = node_index;
  info.op = reg->builtin_code;
  info.version = reg->version;
  if (node->inputs) info.inputs.assign(node->inputs->data, node->inputs->data + node->inputs->size);
  if (node->outputs)
    info.outputs.assign(node->outputs->data, node->outputs->data + node->outputs->size);
  info.builtin_data = node->builtin_data;
  return info;
}

bool ActivationRange(int activation, float* lo, float* hi) {
  // TFLite's own bounds: NONE clamps to the finite range, so +-Inf becomes +-FLT_MAX there too.
  const float big = std::numeric_limits<float>::max();
  switch (activation) {
    case 0:
      *lo = -big;
      *hi = big;
      return true;  // NONE
    case 1:
      *lo = 0.f;
      *hi = big;
      return true;  // RELU
    case 2:
      *lo = -1.f;
      *hi = 1.f;
      return true;  // RELU_N1_TO_1
    case 3:
      *lo = 0.f;
      *hi = 6.f;
      return true;  // RELU6
    default:
      return false;  // TANH, SIGN_BIT, SIGMOID: the CPU reference differs per op
  }
}

void Unbounded(float* lo, float* hi) {
  *lo = -std::numeric_limits<float>::infinity();
  *hi = std::numeric_limits<float>::infinity();
}

}  // namespace clgpu
