// Element-wise binary ops with NumPy-style broadcasting up to 6 dims: ADD, SUB, MUL, DIV,
// MAXIMUM, MINIMUM, SQUARED_DIFFERENCE, POW and PRELU. One program (kernels/binary.cl) serves all
// of them: the op is a kernel argument. Same-shape operands take a 4-wide path, broadcasts that
// merge into three axes a path without the per-element walk over the rank.
#include <algorithm>
#include <cstring>
#include <tuple>

#include "common/error.h"
#include "ops/broadcast.h"
#include "ops/int8_ops.h"
#include "ops/op.h"
#include "ops/quant.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr int kMaxRank = 6;

// TFLite builtin codes, the op numbers kernels/binary.cl switches on, and whether the node's
// params start with a fused activation (TfLiteAddParams, TfLiteSubParams, TfLiteMulParams,
// TfLiteDivParams all do).
struct BinaryKind {
  int32_t code;
  const char* name;
  int op;
  bool activation;
};
constexpr BinaryKind kKinds[] = {
    {tfl::kAdd, "ADD", 0, true},
    {tfl::kSub, "SUB", 1, true},
    {tfl::kMul, "MUL", 2, true},
    {tfl::kDiv, "DIV", 3, true},
    {tfl::kMaximum, "MAXIMUM", 4, false},
    {tfl::kMinimum, "MINIMUM", 5, false},
    {tfl::kSquaredDifference, "SQUARED_DIFFERENCE", 6, false},
    {tfl::kPow, "POW", 7, false},
    {tfl::kPrelu, "PRELU", 8, false},
};

const BinaryKind& KindOf(int32_t code) {
  for (const BinaryKind& k : kKinds)
    if (k.code == code) return k;
  throw Error("not a binary op: " + std::to_string(code));
}

Shape BroadcastShape(const char* op, const Shape& a, const Shape& b) {
  return BroadcastShapes(op, {a, b});
}

// The output seen as [d0][d1][d2], each operand's strides along those three axes (0 where it
// broadcasts, 0 or 1 along d2): adjacent axes merged wherever both operands allow it (each
// broadcasts along both, or walks both contiguously). False when more than three axes remain.
// A squeeze-and-excitation scale [B,H,W,C] x [B,1,1,C] is [B][H*W][C] with strides (C, 0, 1),
// a per-channel bias [B,H,W,C] + [C] is [1][B*H*W][C] with (0, 0, 1).
struct Collapsed {
  int dims[3] = {1, 1, 1};
  int strides[2][3] = {};
};
bool Collapse(const Shape& out, const std::vector<int>& sa, const std::vector<int>& sb,
              Collapsed* c) {
  std::vector<int> dims;
  std::vector<int> st[2];
  for (int d = static_cast<int>(out.size()) - 1; d >= 0; --d) {
    if (out[d] == 1) continue;
    const int s[2] = {sa[d], sb[d]};
    bool merge = !dims.empty();
    for (int i = 0; i < 2 && merge; ++i)
      merge =
          s[i] == 0 ? st[i].back() == 0 : st[i].back() != 0 && s[i] == st[i].back() * dims.back();
    if (merge) {
      dims.back() *= out[d];
      continue;
    }
    dims.push_back(out[d]);
    for (int i = 0; i < 2; ++i) st[i].push_back(s[i]);
  }
  if (dims.size() > 3) return false;
  for (size_t k = 0; k < dims.size(); ++k) {  // innermost first
    c->dims[2 - k] = dims[k];
    for (int i = 0; i < 2; ++i) c->strides[i][2 - k] = st[i][k];
  }
  return c->strides[0][2] <= 1 && c->strides[1][2] <= 1;
}

// `s` with leading 1s up to `rank`.
Shape Aligned(const Shape& s, size_t rank) {
  Shape v(rank - s.size(), 1);
  v.insert(v.end(), s.begin(), s.end());
  return v;
}

class BinaryOp : public Op, public Chunker, public FoldTarget, public FoldSource {
 public:
  BinaryOp(const NodeInfo& node, const BinaryKind& kind, int activation, bool neon)
      : Op(node, {node.inputs[0], node.inputs[1]}, {node.outputs[0]}), kind_(kind), neon_(neon) {
    if (kind.activation)
      ActivationRange(activation, &act_min_, &act_max_);
    else
      Unbounded(&act_min_, &act_max_);  // MAXIMUM, POW, ...: the CPU passes +-Inf on
  }
  // A chunk: the same op over boxes of the operands.
  explicit BinaryOp(const BinaryOp& whole)
      : Op(whole.node_index()), kind_(whole.kind_), neon_(whole.neon_) {
    // A chunk clamps as its whole op does, a folded clamp included.
    std::tie(act_min_, act_max_) = whole.ClampBounds(whole.act_min_, whole.act_max_);
  }
  const char* type_name() const override { return kind_.name; }
  const Chunker* chunker() const override { return this; }
  const FoldTarget* fold_target() const override { return this; }
  FoldSource* fold_source() override { return this; }
  // The ADD's clamp, a clamp activation folded into it included.
  bool IsResidualAdd(int, ResidualAdd* add) const override {
    if (kind_.code != tfl::kAdd) return false;
    std::tie(add->act_min, add->act_max) = ClampBounds(act_min_, act_max_);
    return true;
  }
  std::string algorithm() const override {
    return std::string(same_ ? "elementwise" : "broadcast") + (has_slopes() ? "+PRELU" : "") +
           (output_quantize() ? "+QUANTIZE" : "");
  }
  // Operands and output of one size (binary_same, which applies per-channel slopes).
  bool TakesSlopes(const OpContext&, const std::vector<Shape>& in) const override {
    if (in.size() < 2 || in[0].empty()) return false;
    const int64_t n = NumElements(BroadcastShape(kind_.name, in[0], in[1]));
    return NumElements(in[0]) == n && NumElements(in[1]) == n;
  }
  bool GetClamp(float* lo, float* hi) const override {
    *lo = act_min_, *hi = act_max_;
    return true;
  }
  // A QUANTIZE of its output (fusion/requantize.cc: an int8 model's float residual ADD), stored
  // by binary_same (the pass checks the operands' sizes).
  bool TakesQuantize() const override { return true; }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    return {BroadcastShape(kind_.name, in[0], in[1])};
  }
  double Flops(const std::vector<Shape>&, const std::vector<Shape>& out) const override {
    return static_cast<double>(NumElements(out[0]));
  }

  // Chunks are boxes of the output; each operand (seen at the output's rank) gives
  // the same box, or index 0 along the axes it broadcasts.
  bool GetChunkSpec(const std::vector<Shape>& in, ChunkSpec* spec) const override {
    const Shape out = BroadcastShape(kind_.name, in[0], in[1]);
    spec->views = {Aligned(in[0], out.size()), Aligned(in[1], out.size()), out};
    for (size_t a = 0; a < out.size(); ++a) spec->axes.push_back(static_cast<int>(a));
    return true;
  }
  std::vector<Box> ChunkInputs(const std::vector<Shape>& in, const Box& out) const override {
    std::vector<Box> boxes;
    for (const Shape& s : in) {
      const Shape v = Aligned(s, out.size.size());
      Box b = out;
      for (size_t a = 0; a < v.size(); ++a)
        if (v[a] == 1) b.begin[a] = 0, b.size[a] = 1;
      boxes.push_back(std::move(b));
    }
    return boxes;
  }
  std::unique_ptr<Op> MakeChunk(const std::vector<Shape>&, const Box&) const override {
    return std::make_unique<BinaryOp>(*this);
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes,
               const std::vector<Shape>& out_shapes, const std::vector<cl_mem>& in,
               const std::vector<cl_mem>& out) override {
    const Shape& o = out_shapes[0];
    const int total = static_cast<int>(NumElements(o));
    same_ = NumElements(in_shapes[0]) == total && NumElements(in_shapes[1]) == total;
    const Attachments::Quantize* store = output_quantize();
    if (store && !same_)
      throw Error(std::string(kind_.name) + ": its folded QUANTIZE needs operands of its size");
    std::string defines;
    if (store) {
      defines = std::string("-DQUANT_STORE") + (store->uint8 ? " -DQUANT_UINT8" : "");
#if !defined(__x86_64__) && !defined(__i386__)
      defines += " -DQUANT_SATURATING_CVT";  // the CPU kernels' float -> int conversion here
#endif
    }
    auto prog = ctx.GetProgram("binary", defines);
    const auto [lo, hi] = ClampBounds(act_min_, act_max_);
    Launch l;
    l.dims = 1;
    if (same_) {
      l.name = "binary_same";
      l.kernel = CreateKernel(*prog, l.name);
      SetArgs(l.kernel, in[0], in[1], out[0], total, kind_.op, lo, hi);
      if (has_slopes()) SetArgsFrom(l.kernel, 7, in.back(), static_cast<int>(o.back()));
      if (store) {
        // As QuantizeOp stores it: 1 / scale rounded once, the NEON loop's first elements.
        const float qs = store->q.scale[0];
        const ValueType qt = store->uint8 ? ValueType::kUInt8 : ValueType::kInt8;
        SetArgsFrom(l.kernel, has_slopes() ? 9 : 7, qs,
                    static_cast<float>(1.0 / static_cast<double>(qs)), store->q.zero_point[0],
                    QuantMin(qt), QuantMax(qt), NeonQuantizeBelow(neon_, total));
      }
      l.global[0] = (total + 3) / 4;
    } else if (has_slopes()) {
      throw Error(std::string(kind_.name) + ": its folded PRELU needs operands of its size");
    } else if (Collapsed c; Collapse(o, BroadcastStrides(in_shapes[0], o),
                                     BroadcastStrides(in_shapes[1], o), &c)) {
      // Three axes, no per-element walk over the rank; 4 elements along d2 when it allows.
      l.name = "binary_bcast3";
      l.kernel = CreateKernel(*prog, l.name);
      const int vec = c.dims[2] % 4 == 0 ? 4 : 1;
      const int n = total / vec;
      SetArgs(l.kernel, in[0], in[1], out[0], n, c.dims[1], c.dims[2] / vec, vec, c.strides[0][0],
              c.strides[0][1], c.strides[0][2], c.strides[1][0], c.strides[1][1], c.strides[1][2],
              kind_.op, lo, hi);
      l.global[0] = n;
    } else {
      std::vector<int> meta(o.begin(), o.end());
      for (int i = 0; i < 2; ++i) {
        auto st = BroadcastStrides(in_shapes[i], o);
        meta.insert(meta.end(), st.begin(), st.end());
      }
      meta_ = UploadInts(ctx, meta);
      l.name = "binary_broadcast";
      l.kernel = CreateKernel(*prog, l.name);
      const int rank = static_cast<int>(o.size());
      SetArgs(l.kernel, in[0], in[1], out[0], total, rank, meta_.get(), kind_.op, lo, hi);
      l.global[0] = total;
    }
    launches_.clear();
    launches_.push_back(std::move(l));
  }

 private:
  const BinaryKind& kind_;
  bool neon_ = false;  // the runtime's QUANTIZE rounds its first elements as NEON (quant.h)
  float act_min_ = 0, act_max_ = 0;
  bool same_ = true;
  Buffer meta_;
};

// The fused activation of a node whose params start with one (0 = none otherwise).
int ActivationOf(const BinaryKind& kind, const NodeInfo& node) {
  int act = 0;
  if (kind.activation) std::memcpy(&act, node.builtin_data, sizeof act);
  return act;
}

std::string Check(const GraphView& g, const NodeInfo& node) {
  const BinaryKind& kind = KindOf(node.op);
  if (kind.activation && !node.builtin_data) return std::string("missing ") + kind.name + " params";
  if (node.inputs.size() != 2 || node.outputs.size() != 1) return "unexpected input/output count";
  float lo, hi;
  if (const int act = ActivationOf(kind, node); !ActivationRange(act, &lo, &hi))
    return "fused activation " + std::to_string(act) + " is not supported";
  // Quantized tensors: binary_int8.cc (ADD, SUB, MUL, PRELU).
  const bool quantized =
      g.valid_tensor(node.inputs[0]) && IsQuantized(g.value_type(node.inputs[0]));
  if (quantized && kind.code != tfl::kAdd && kind.code != 41 && kind.code != 18 &&
      kind.code != tfl::kPrelu)
    return std::string("int8 ") + kind.name + " is not supported";
  if (auto why = quantized
                     ? (kind.code == 18 ? CheckMulInt8(g, node) : CheckAddInt8(g, node))
                     : CheckFloatTensors(g, {node.inputs[0], node.inputs[1], node.outputs[0]});
      !why.empty())
    return why;
  const Shape a = g.shape(node.inputs[0]), b = g.shape(node.inputs[1]);
  if (a.size() > kMaxRank || b.size() > kMaxRank) return "rank above " + std::to_string(kMaxRank);
  try {
    // TFLite's PRELU requires the alpha to broadcast into the input's shape, not beyond it.
    if (BroadcastShape(kind.name, a, b) != a && kind.code == 54)
      return "PRELU alpha " + ShapeString(b) + " broadcasts beyond the input " + ShapeString(a);
  } catch (const Error& e) {
    return What(e);
  }
  return "";
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  if (IsQuantized(g.value_type(node.inputs[0]))) return CreateAddInt8(g, node);
  const BinaryKind& kind = KindOf(node.op);
  return std::make_unique<BinaryOp>(node, kind, ActivationOf(kind, node), g.cpu_kernels().neon);
}

std::string Describe(const NodeInfo& n) {
  const BinaryKind& kind = KindOf(n.op);
  return kind.activation ? "act=" + std::to_string(ActivationOf(kind, n)) : "";
}

}  // namespace

extern const OpHandler kAddHandler = {tfl::kAdd, "ADD",   Check, Create,
                                      Describe,  nullptr, false, true};
extern const OpHandler kSubHandler = {tfl::kSub, "SUB",   Check, Create,
                                      Describe,  nullptr, false, true};
extern const OpHandler kMulHandler = {tfl::kMul, "MUL",   Check, Create,
                                      Describe,  nullptr, false, true};
extern const OpHandler kDivHandler = {tfl::kDiv, "DIV",   Check, Create,
                                      Describe,  nullptr, false, true};
extern const OpHandler kMaximumHandler = {tfl::kMaximum, "MAXIMUM", Check, Create,
                                          Describe,      nullptr,   false, true};
extern const OpHandler kMinimumHandler = {tfl::kMinimum, "MINIMUM", Check, Create,
                                          Describe,      nullptr,   false, true};
extern const OpHandler kSquaredDifferenceHandler = {
    tfl::kSquaredDifference, "SQUARED_DIFFERENCE", Check, Create, Describe, nullptr, false, true};
extern const OpHandler kPowHandler = {tfl::kPow, "POW",   Check, Create,
                                      Describe,  nullptr, false, true};
// XNNPACK takes no int8 PRELU: TFLite's own kernel runs it on one thread at 6.6-12 ns an element
// on an H200 host, whatever the interpreter's threads (bench/results/cpu-channel-ops-*.md).
constexpr double kCpuInt8PreluNs = 10;
extern const OpHandler kPreluHandler = [] {
  OpHandler h{tfl::kPrelu, "PRELU", Check, Create, Describe, nullptr, false, true};
  h.cpu_int8_ns_per_element = kCpuInt8PreluNs;
  return h;
}();

}  // namespace clgpu
