// CONCATENATION of float or quantized tensors along any axis: each input is copied into its
// slice of the output, up to kMaxInputsPerLaunch inputs per launch (kernels/concat.cl; quantized
// values as their integers, OpContext::ForValues). A uint8 input quantized unlike the output is
// then rescaled over its slice as TFLite does (int8 inputs must match: TFLite refuses others).
// The kernels clamp by a fused activation, though TFLite's kernels (2.14, LiteRT 2.3) accept
// only NONE, so Check declines the others. PACK is this op with a unit axis per input.
#include "ops/concat.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "ops/op.h"
#include "ops/quant.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr int kMaxRank = 6;
constexpr int kMaxInputsPerLaunch = 8;  // the input slots of concat_multi

// `s` as [outer, axis, inner] around `axis`: the same elements in the same order.
Shape View3(const Shape& s, int axis) {
  Shape v = {1, s[axis], 1};
  for (int a = 0; a < axis; ++a) v[0] *= s[a];
  for (size_t a = axis + 1; a < s.size(); ++a) v[2] *= s[a];
  return v;
}

class ConcatOp : public Op, public Chunker {
 public:
  // `stack`: PACK, whose inputs are each seen with a unit axis inserted at `axis`.
  ConcatOp(const NodeInfo& node, int axis, int activation, bool stack = false)
      : Op(node, node.inputs, {node.outputs[0]}),
        axis_(axis),
        stack_(stack),
        name_(stack ? "PACK" : "CONCATENATION") {
    // The CPU kernels copy (they accept only NONE, PACK has none): +-Inf stays, no +-FLT_MAX
    // bound.
    if (stack || activation == tfl::kActNone)
      Unbounded(&act_min_, &act_max_);
    else
      ActivationRange(activation, &act_min_, &act_max_);
  }
  // A chunk: the input boxes concatenated along axis 1 of the [outer, axis, inner] views.
  explicit ConcatOp(const ConcatOp& whole)
      : Op(whole.node_index()),
        axis_(1),
        act_min_(whole.act_min_),
        act_max_(whole.act_max_),
        name_(whole.name_) {}  // a PACK's chunk is a concatenation of its [outer, 1, inner] boxes

  const char* type_name() const override { return name_; }
  std::string algorithm() const override {
    return std::string(vec4_ ? "copy_multi4" : "copy_multi") + (output_slice() ? "+CHAIN" : "");
  }
  const Chunker* chunker() const override { return this; }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in_shapes) const override {
    std::vector<Shape> in;
    for (const Shape& s : in_shapes) in.push_back(In(s));
    Shape out = in.at(0);
    if (axis_ >= static_cast<int>(out.size()))
      throw Error("CONCATENATION axis " + std::to_string(axis_) + " is out of range for " +
                  ShapeString(out));
    out[axis_] = 0;
    for (const Shape& s : in) {
      bool ok = s.size() == out.size();
      for (size_t a = 0; ok && a < s.size(); ++a)
        ok = static_cast<int>(a) == axis_ || s[a] == out[a];
      if (!ok)
        throw Error("CONCATENATION inputs " + ShapeString(in[0]) + " and " + ShapeString(s) +
                    " differ off axis " + std::to_string(axis_));
      out[axis_] += s[axis_];
    }
    return {out};
  }
  double Flops(const std::vector<Shape>&, const std::vector<Shape>&) const override { return 0; }
  // One input without a clamp (PACK of one tensor): its elements in order, a flat copy.
  bool FlatRanges(const std::vector<Shape>& in, std::vector<size_t>* first) const override {
    if (in.size() != 1 || !stack_) return false;
    first->assign(1, 0);
    return true;
  }

  // Chunks are boxes of the [outer, axis, inner] output view; each input gives the part
  // of the box's axis range it covers (possibly none: an empty box, nothing copied).
  bool CopyChunkSpec(const std::vector<Shape>& in, ChunkSpec* spec) const {
    for (const Shape& s : in) spec->views.push_back(View3(In(s), axis_));
    spec->views.push_back(View3(InferShapes(in)[0], axis_));
    spec->axes = {0, 1, 2};
    return true;
  }
  std::vector<Box> ChunkInputs(const std::vector<Shape>& in, const Box& out) const override {
    std::vector<Box> boxes;
    int offset = 0;
    for (const Shape& s : in) {
      const int n = In(s)[axis_];
      const int lo = std::max(out.begin[1], offset);
      const int hi = std::min(out.begin[1] + out.size[1], offset + n);
      Box b = out;
      b.begin[1] = hi > lo ? lo - offset : 0;
      b.size[1] = std::max(hi - lo, 0);
      boxes.push_back(std::move(b));
      offset += n;
    }
    return boxes;
  }
  std::unique_ptr<Op> MakeChunk(const std::vector<Shape>&, const Box&) const override {
    return std::make_unique<ConcatOp>(*this);
  }

  // Quantized inputs to rescale: (input, scale, bias), and the output's zero point and range.
  struct Rescale {
    size_t input;
    float scale, bias;
  };
  void SetRescales(std::vector<Rescale> r, int out_zero, int qmin, int qmax) {
    rescales_ = std::move(r);
    out_zero_ = out_zero, qmin_ = qmin, qmax_ = qmax;
  }
  // Rescaled chunks would need each chunk's own inputs: chunks only without rescales.
  bool GetChunkSpec(const std::vector<Shape>& in, ChunkSpec* spec) const override {
    return rescales_.empty() && CopyChunkSpec(in, spec);
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes,
               const std::vector<Shape>& out_shapes, const std::vector<cl_mem>& in,
               const std::vector<cl_mem>& out) override {
    const Shape o = View3(out_shapes[0], axis_);
    const int rows = o[0], inner = o[2];
    // The first of a chain of concatenations extended in place (fusion/concat_chain.cc): its rows
    // lie in a wider tensor's, at that tensor's pitch.
    const Attachments::OutSlice* slice = output_slice();
    if (slice && (!rescales_.empty() || axis_ != int(out_shapes[0].size()) - 1))
      throw Error(std::string(name_) +
                  ": only a float concatenation of the last axis writes rows of a wider tensor");
    const int out_cols = slice ? slice->ldc : o[1] * inner;
    auto prog = ctx.GetProgram("concat");
    launches_.clear();
    vec4_ = true;
    // Inputs with no elements (possibly no buffer either) take no slot; the others are
    // contiguous in the output row, so each launch covers one span of columns.
    std::vector<cl_mem> bufs;
    std::vector<int> cols;
    for (size_t i = 0; i < in.size(); ++i) {
      const int c = In(in_shapes[i])[axis_] * inner;
      if (c > 0) {
        bufs.push_back(in[i]);
        cols.push_back(c);
      }
    }
    if (rows == 0) return;
    int col0 = slice ? slice->offset : 0;
    for (size_t first = 0; first < bufs.size(); first += kMaxInputsPerLaunch) {
      const size_t n = std::min(bufs.size() - first, size_t(kMaxInputsPerLaunch));
      launches_.push_back(
          MultiLaunch(*prog, &bufs[first], &cols[first], n, rows, out_cols, col0, out[0]));
      for (size_t k = 0; k < n; ++k) col0 += cols[first + k];
    }
    for (const Rescale& r : rescales_) {
      int start = 0;
      for (size_t i = 0; i < r.input; ++i) start += In(in_shapes[i])[axis_] * inner;
      const int c = In(in_shapes[r.input])[axis_] * inner, total = rows * c;
      if (total == 0) continue;
      Launch l;
      l.name = "concat_requant";
      l.kernel = CreateKernel(*prog, l.name);
      SetArgs(l.kernel, in[r.input], out[0], total, c, out_cols, start, r.scale, r.bias, out_zero_,
              qmin_, qmax_);
      l.global[0] = RoundUp(size_t(total), 64);
      launches_.push_back(std::move(l));
    }
  }

 private:
  // One concat_multi launch: `n` inputs (<= kMaxInputsPerLaunch), `cols[k]` wide, placed one
  // after another from column `col0` of `out`. And-s `vec4_` with whether it took the float4
  // form (every width, col0 and the output row multiples of 4).
  Launch MultiLaunch(const Program& prog, const cl_mem* bufs, const int* cols, size_t n, int rows,
                     int out_cols, int col0, cl_mem out) {
    constexpr size_t kGroup = 64;  // work-items per group (the global size is padded to it)
    bool vec = out_cols % 4 == 0 && col0 % 4 == 0;
    int span = 0;
    for (size_t k = 0; k < n; ++k) {
      vec = vec && cols[k] % 4 == 0;
      span += cols[k];
    }
    vec4_ = vec4_ && vec;
    const int div = vec ? 4 : 1;
    // Unused slots: the first input's buffer, ending at the span (never picked).
    cl_mem slot[kMaxInputsPerLaunch];
    int end[kMaxInputsPerLaunch];
    int e = 0;
    for (size_t k = 0; k < size_t(kMaxInputsPerLaunch); ++k) {
      slot[k] = k < n ? bufs[k] : bufs[0];
      if (k < n) e += cols[k] / div;
      end[k] = e;
    }
    const int total = rows * (span / div);
    Launch l;
    l.name = vec ? "concat_multi4" : "concat_multi";
    l.kernel = CreateKernel(prog, l.name);
    SetArgs(l.kernel, out, total, span / div, out_cols / div, col0 / div, act_min_, act_max_,
            slot[0], slot[1], slot[2], slot[3], slot[4], slot[5], slot[6], slot[7], end[0], end[1],
            end[2], end[3], end[4], end[5], end[6]);
    l.dims = 1;
    l.global[0] = RoundUp(size_t(total), kGroup);
    l.local[0] = kGroup;
    return l;
  }

  // An input as concatenated: PACK's gets its unit axis.
  Shape In(const Shape& s) const {
    if (!stack_) return s;
    Shape t = s;
    t.insert(t.begin() + std::min<size_t>(axis_, t.size()), 1);
    return t;
  }

  int axis_;
  bool stack_ = false;
  float act_min_ = 0, act_max_ = 0;
  const char* name_ = "CONCATENATION";
  bool vec4_ = false;
  std::vector<Rescale> rescales_;
  int out_zero_ = 0, qmin_ = 0, qmax_ = 0;
};

// Quantized tensors: all of the output's type; an int8 input quantized unlike the output is
// refused (as TFLite does), a uint8 one rescaled.
std::string CheckQuantized(const GraphView& g, const NodeInfo& node, ValueType t) {
  std::vector<int> tensors = node.inputs;
  tensors.push_back(node.outputs[0]);
  for (int x : tensors)
    if (auto why = CheckQuantActivation(g, x, t); !why.empty()) return why;
  const QuantParams out = g.quant(node.outputs[0]);
  for (int x : node.inputs) {
    const QuantParams q = g.quant(x);
    if (t == ValueType::kInt8 && (q.scale != out.scale || q.zero_point != out.zero_point))
      return "an int8 input is quantized unlike the output (TFLite's kernel refuses it)";
  }
  return "";
}

// The axis in [0, rank), or -1 if out of range (negative counts from the end, as on the CPU).
int NormalizedAxis(int axis, int rank) {
  if (axis < 0) axis += rank;
  return axis >= 0 && axis < rank ? axis : -1;
}

std::string Check(const GraphView& g, const NodeInfo& node) {
  if (!node.builtin_data) return "missing CONCATENATION params";
  if (node.inputs.empty() || node.outputs.size() != 1) return "unexpected input/output count";
  tfl::ConcatenationParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  // Both runtimes' CPU kernels refuse a fused activation here; claiming it would run a
  // model the CPU rejects.
  if (p.activation != tfl::kActNone)
    return "fused activation " + std::to_string(p.activation) +
           " on CONCATENATION (TFLite's kernel accepts none)";
  std::vector<int> tensors = node.inputs;
  tensors.push_back(node.outputs[0]);
  const ValueType t =
      g.valid_tensor(node.outputs[0]) ? g.value_type(node.outputs[0]) : ValueType::kFloat;
  if (auto why = IsQuantized(t) ? CheckQuantized(g, node, t) : CheckFloatTensors(g, tensors);
      !why.empty())
    return why;
  const Shape s0 = g.shape(node.inputs[0]);
  if (s0.empty() || s0.size() > kMaxRank) return "rank must be 1-" + std::to_string(kMaxRank);
  const int axis = NormalizedAxis(p.axis, static_cast<int>(s0.size()));
  if (axis < 0) return "axis " + std::to_string(p.axis) + " is out of range";
  std::vector<Shape> in;
  for (int t : node.inputs) in.push_back(g.shape(t));
  try {
    ConcatOp(node, axis, p.activation).InferShapes(in);
  } catch (const Error& e) {
    return What(e);
  }
  return "";
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  tfl::ConcatenationParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  const int axis = NormalizedAxis(p.axis, static_cast<int>(g.shape(node.inputs[0]).size()));
  auto op = std::make_unique<ConcatOp>(node, axis, p.activation);
  const ValueType t = g.value_type(node.outputs[0]);
  if (IsQuantized(t)) {
    const QuantParams out = g.quant(node.outputs[0]);
    std::vector<ConcatOp::Rescale> rescales;
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      const QuantParams q = g.quant(node.inputs[i]);
      if (q.scale == out.scale && q.zero_point == out.zero_point) continue;
      // TFLite's float arithmetic, operation by operation.
      const float inverse = 1.f / out.scale[0];
      const float scale = q.scale[0] * inverse;
      rescales.push_back({i, scale, -static_cast<float>(q.zero_point[0]) * scale});
    }
    op->SetRescales(std::move(rescales), out.zero_point[0], QuantMin(t), QuantMax(t));
  }
  return op;
}

std::string Describe(const NodeInfo& n) {
  tfl::ConcatenationParams p;
  std::memcpy(&p, n.builtin_data, sizeof p);
  return "axis=" + std::to_string(p.axis) + " act=" + std::to_string(p.activation);
}

}  // namespace

std::unique_ptr<Op> MakePackOp(const NodeInfo& node, int axis) {
  return std::make_unique<ConcatOp>(node, axis, tfl::kActNone, true);
}

extern const OpHandler kConcatenationHandler = {tfl::kConcatenation, "CONCATENATION", Check, Create,
                                                Describe};

}  // namespace clgpu
