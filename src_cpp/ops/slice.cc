// SLICE of a float tensor with constant begin and size (-1: to the end of the axis), ranks 1-5:
// an index map (ops/strided_copy.h), a flat copy when the box is one contiguous range.
#include "common/error.h"
#include "ops/quant.h"
#include "ops/strided_copy.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr int kMaxRank = 5;  // TFLite's kernel: inputs of rank 1-5

// "" with the map, or why the box does not fit the input (TFLite's kernel errors then).
std::string MapOf(const Shape& in, const std::vector<int64_t>& begin,
                  const std::vector<int64_t>& size, AxisMap* m) {
  if (begin.size() != in.size() || size.size() != in.size())
    return "begin and size must have one entry per input axis";
  *m = AxisMap{};
  m->in = in;
  for (size_t a = 0; a < in.size(); ++a) {
    const int64_t n = size[a] == -1 ? in[a] - begin[a] : size[a];
    if (begin[a] < 0 || begin[a] > in[a] || n < 0 || n > in[a] - begin[a])
      return "the box begin " + std::to_string(begin[a]) + " size " + std::to_string(size[a]) +
             " does not fit axis " + std::to_string(a) + " of " + ShapeString(in);
    m->out.push_back(static_cast<int>(n));
    m->src.push_back(static_cast<int>(a));
    m->step.push_back(1);
    m->first.push_back(n > 0 ? static_cast<int>(begin[a]) : 0);
  }
  return CheckAxisMap(*m);
}

class SliceOp : public StridedCopyOp {
 public:
  SliceOp(const NodeInfo& node, std::vector<int64_t> begin, std::vector<int64_t> size)
      : StridedCopyOp(node, {node.inputs[0]}, {node.outputs[0]}),
        begin_(std::move(begin)),
        size_(std::move(size)) {}
  const char* type_name() const override { return "SLICE"; }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    return {Maps(in)[0].out};
  }
  std::vector<AxisMap> Maps(const std::vector<Shape>& in) const override {
    AxisMap m;
    if (auto why = MapOf(in.at(0), begin_, size_, &m); !why.empty())
      throw Error("SLICE of " + ShapeString(in.at(0)) + ": " + why);
    return {m};
  }

 private:
  std::vector<int64_t> begin_, size_;
};

std::string Read(const GraphView& g, const NodeInfo& node, std::vector<int64_t>* begin,
                 std::vector<int64_t>* size) {
  if (node.inputs.size() != 3 || node.outputs.size() != 1) return "unexpected input/output count";
  if (auto why = CheckMovedTensors(g, {node.inputs[0], node.outputs[0]}); !why.empty()) return why;
  if (auto why = g.ReadConstantInts(node.inputs[1], "SLICE begin", begin); !why.empty()) return why;
  if (auto why = g.ReadConstantInts(node.inputs[2], "SLICE size", size); !why.empty()) return why;
  const Shape in = g.shape(node.inputs[0]);
  if (in.empty() || in.size() > kMaxRank) return "rank must be 1-" + std::to_string(kMaxRank);
  AxisMap m;
  if (auto why = MapOf(in, *begin, *size, &m); !why.empty()) return why;
  if (m.out != g.shape(node.outputs[0]))
    return "the model declares output " + ShapeString(g.shape(node.outputs[0])) +
           ", the slice gives " + ShapeString(m.out);
  return "";
}

std::string Check(const GraphView& g, const NodeInfo& node) {
  std::vector<int64_t> begin, size;
  return Read(g, node, &begin, &size);
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  std::vector<int64_t> begin, size;
  if (auto why = Read(g, node, &begin, &size); !why.empty()) throw Error(why);
  return std::make_unique<SliceOp>(node, std::move(begin), std::move(size));
}

}  // namespace

extern const OpHandler kSliceHandler = {tfl::kSlice, "SLICE", Check, Create, nullptr, OutputsWork};

}  // namespace clgpu
