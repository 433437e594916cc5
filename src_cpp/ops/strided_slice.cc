// STRIDED_SLICE of a float tensor with constant begin/end/strides and all of TFLite's masks
// (begin, end, ellipsis, new axis, shrink axis) and `offset` (version 8): resolved per axis as
// TFLite's kernel does, then run as an index map (ops/strided_copy.h), or as a flat copy when
// the slice is one contiguous range.
#include <algorithm>
#include <climits>
#include <cstring>

#include "common/error.h"
#include "ops/quant.h"
#include "ops/strided_copy.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr int kMaxRank = 5;  // TFLite's kernel: inputs of rank 1-5

struct Spec {
  std::vector<int> begin, end, strides;
  tfl::StridedSliceParams p{};
};

int Clamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }
bool Bit(int mask, int i) { return (static_cast<unsigned>(mask) >> i) & 1u; }

// One axis of the slice over the input with new axes inserted, as TFLite's kernel expands the
// ellipsis and new axes: the spec entry it takes, or a whole axis.
struct EffAxis {
  int in_axis = -1;  // -1: a new axis of extent 1
  int begin = 0, end = 0, stride = 1;
  bool begin_mask = false, end_mask = false, shrink = false;
  int spec = -1;  // the spec entry, or -1
};

// The map and output shape TFLite's kernel computes; "" or why the node cannot run exactly.
std::string Resolve(const Shape& in, const Spec& s, AxisMap* m, Shape* out) {
  const int n = static_cast<int>(s.begin.size()), rank = static_cast<int>(in.size());
  const tfl::StridedSliceParams& p = s.p;
  for (int mask : {p.begin_mask, p.end_mask, p.ellipsis_mask, p.new_axis_mask, p.shrink_axis_mask})
    if (n < 31 && (static_cast<unsigned>(mask) >> n) != 0) return "mask bits past the slice spec";
  if (p.ellipsis_mask & (p.ellipsis_mask - 1)) return "more than one ellipsis";
  // With offset TFLite sizes each output axis from the end tensor at the axis' own position.
  if (p.offset && (p.ellipsis_mask || p.new_axis_mask || n != rank))
    return "offset with an ellipsis, a new axis or fewer specs than axes";
  int added = 0;
  for (int i = 0; i < n; ++i) added += Bit(p.new_axis_mask, i) && !Bit(p.ellipsis_mask, i);
  const int eff = rank + added;
  std::vector<EffAxis> axes(eff);
  // Which effective axes the ellipsis covers and which are new (TFLite's expansion).
  std::vector<bool> ellipsis(eff, false), fresh(eff, false);
  int ellipsis_start = eff, expanded = 0;
  for (int i = 0; i < eff;) {
    if (Bit(p.ellipsis_mask, i)) {
      ellipsis_start = i;
      const int stop = std::max(i + 1, std::min(i + 1 + added + rank - n, eff));
      expanded = stop - i - 1;
      for (; i < stop; ++i) ellipsis[i] = true;
      continue;
    }
    if (i - expanded >= 0 && Bit(p.new_axis_mask, i - expanded)) fresh[i] = true;
    ++i;
  }
  int in_axis = 0, shift = 0;
  for (int i = 0; i < eff; ++i) {
    EffAxis& a = axes[i];
    if (ellipsis[i]) {
      shift = std::max(0, i - ellipsis_start);
      a.in_axis = in_axis++;
      a.begin_mask = a.end_mask = true;
    } else if (fresh[i]) {
      a.end = 1;
    } else if (i >= n + expanded) {
      a.in_axis = in_axis++;
      a.begin_mask = a.end_mask = true;
    } else {
      const int k = i - shift;
      a.in_axis = in_axis++;
      a.spec = k;
      a.begin = s.begin[k], a.end = s.end[k], a.stride = s.strides[k];
      a.begin_mask = Bit(p.begin_mask, k), a.end_mask = Bit(p.end_mask, k);
      a.shrink = Bit(p.shrink_axis_mask, k);
    }
  }
  if (in_axis != rank) return "the slice spec does not cover the input's axes";
  *m = AxisMap{};
  m->in = in;
  m->first.assign(rank, 0);
  out->clear();
  for (int i = 0; i < eff; ++i) {
    const EffAxis& a = axes[i];
    // TFLite's kernel fails on these (the CPU then reports it).
    if (a.stride == 0 || a.stride == INT_MIN) return "stride " + std::to_string(a.stride);
    const int size = a.in_axis < 0 ? 1 : in[a.in_axis];
    int start = a.begin < 0 ? a.begin + size : a.begin;
    start = a.stride > 0 ? Clamp(start, 0, size) : Clamp(start, -1, size - 1);
    if (a.begin_mask) start = a.stride > 0 ? 0 : size - 1;
    if (a.shrink) {
      // TFLite writes nothing for a shrunk axis walked backwards or indexed out of range.
      if (a.stride < 0) return "a shrunk axis with a negative stride";
      if (start < 0 || start >= size) return "a shrunk axis indexed out of range";
      m->first[a.in_axis] = start;
      continue;
    }
    int64_t stop64 = int64_t(a.end) + (s.p.offset ? start : 0);
    if (stop64 < 0) stop64 += size;
    int stop = static_cast<int>(std::min<int64_t>(std::max<int64_t>(stop64, -1), size));
    stop = a.stride > 0 ? Clamp(stop, 0, size) : Clamp(stop, -1, size - 1);
    if (a.end_mask) stop = a.stride > 0 ? size : -1;
    const int64_t span = int64_t(stop) - start;
    int extent = 0;
    if ((span < 0) == (a.stride < 0) && span != 0)
      extent =
          static_cast<int>(a.stride < 0 ? (span + 1) / a.stride + 1 : (span - 1) / a.stride + 1);
    // With offset, TFLite sizes the output from `end` alone (masks aside); a slice the input
    // clamps, or an end mask, would leave part of that output unwritten or overrun it.
    if (s.p.offset) {
      const int64_t want = s.end[i];
      const int64_t sized = (want < 0) != (a.stride < 0) || want == 0 ? 0
                            : a.stride < 0                            ? (want + 1) / a.stride + 1
                                                                      : (want - 1) / a.stride + 1;
      if (sized != extent) return "an offset slice past the end of its axis";
    }
    out->push_back(extent);
    m->out.push_back(extent);
    m->src.push_back(a.in_axis);
    m->step.push_back(a.stride);
    if (a.in_axis >= 0) m->first[a.in_axis] = extent > 0 ? start : 0;
  }
  return CheckAxisMap(*m);
}

class StridedSliceOp : public StridedCopyOp {
 public:
  StridedSliceOp(const NodeInfo& node, Spec spec)
      : StridedCopyOp(node, {node.inputs[0]}, {node.outputs[0]}), spec_(std::move(spec)) {}
  const char* type_name() const override { return "STRIDED_SLICE"; }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    AxisMap m;
    Shape out;
    if (auto why = Resolve(in.at(0), spec_, &m, &out); !why.empty())
      throw Error("STRIDED_SLICE of " + ShapeString(in.at(0)) + ": " + why);
    return {out};
  }
  std::vector<AxisMap> Maps(const std::vector<Shape>& in) const override {
    AxisMap m;
    Shape out;
    if (auto why = Resolve(in.at(0), spec_, &m, &out); !why.empty()) throw Error(why);
    return {m};
  }

 private:
  Spec spec_;
};

std::string ReadSpec(const GraphView& g, const NodeInfo& node, Spec* s) {
  if (node.inputs.size() != 4 || node.outputs.size() != 1) return "unexpected input/output count";
  if (!node.builtin_data) return "missing STRIDED_SLICE params";
  if (auto why = CheckMovedTensors(g, {node.inputs[0], node.outputs[0]}); !why.empty()) return why;
  std::memcpy(&s->p, node.builtin_data, sizeof s->p);
  const char* names[3] = {"STRIDED_SLICE begin", "STRIDED_SLICE end", "STRIDED_SLICE strides"};
  std::vector<int>* dst[3] = {&s->begin, &s->end, &s->strides};
  for (int k = 0; k < 3; ++k) {
    const int t = node.inputs[1 + k];
    std::vector<int64_t> v;
    if (auto why = g.ReadConstantInts(t, names[k], &v); !why.empty()) return why;
    if (g.type(t) != kTfLiteInt32) return std::string(names[k]) + " is not int32";
    dst[k]->assign(v.begin(), v.end());
  }
  if (s->begin.size() != s->end.size() || s->begin.size() != s->strides.size())
    return "begin, end and strides differ in length";
  if (s->begin.empty() || s->begin.size() > 31) return "slice spec of 1-31 entries expected";
  const Shape in = g.shape(node.inputs[0]);
  if (in.empty() || in.size() > kMaxRank) return "rank must be 1-" + std::to_string(kMaxRank);
  AxisMap m;
  Shape out;
  if (auto why = Resolve(in, *s, &m, &out); !why.empty()) return why;
  if (out != g.shape(node.outputs[0]))
    return "the model declares output " + ShapeString(g.shape(node.outputs[0])) +
           ", the slice gives " + ShapeString(out);
  return "";
}

std::string Check(const GraphView& g, const NodeInfo& node) {
  Spec s;
  return ReadSpec(g, node, &s);
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  Spec s;
  if (auto why = ReadSpec(g, node, &s); !why.empty()) throw Error(why);
  return std::make_unique<StridedSliceOp>(node, std::move(s));
}

std::string Describe(const NodeInfo& n) {
  tfl::StridedSliceParams p;
  std::memcpy(&p, n.builtin_data, sizeof p);
  return "begin_mask=" + std::to_string(p.begin_mask) + " end_mask=" + std::to_string(p.end_mask) +
         " ellipsis_mask=" + std::to_string(p.ellipsis_mask) +
         " new_axis_mask=" + std::to_string(p.new_axis_mask) +
         " shrink_axis_mask=" + std::to_string(p.shrink_axis_mask) +
         " offset=" + std::to_string(p.offset ? 1 : 0);
}

}  // namespace

extern const OpHandler kStridedSliceHandler = {tfl::kStridedSlice, "STRIDED_SLICE", Check, Create,
                                               Describe,           OutputsWork};

}  // namespace clgpu
