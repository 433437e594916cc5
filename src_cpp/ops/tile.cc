// TILE of float tensors up to rank 6 with constant multiples (Keras 3's UpSampling2D repeats
// pixels this way): one work-item per output element reads input[index mod input dims].
#include <climits>

#include "common/error.h"
#include "ops/op.h"
#include "ops/quant.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr int kMaxRank = 6;

class TileOp : public Op {
 public:
  TileOp(const NodeInfo& node, std::vector<int> multiples)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}), multiples_(std::move(multiples)) {}
  const char* type_name() const override { return "TILE"; }
  std::string algorithm() const override { return "gather"; }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    const Shape& s = in.at(0);
    if (s.size() != multiples_.size())
      throw Error("TILE input " + ShapeString(s) + " does not have " +
                  std::to_string(multiples_.size()) + " axes");
    Shape out(s.size());
    int64_t total = 1;
    for (size_t a = 0; a < s.size(); ++a) {
      out[a] = s[a] * multiples_[a];
      total *= out[a];
      if (total > INT_MAX) throw Error("TILE output " + ShapeString(s) + " is too large");
    }
    return {out};
  }
  double Flops(const std::vector<Shape>&, const std::vector<Shape>& out) const override {
    return static_cast<double>(NumElements(out[0]));
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes,
               const std::vector<Shape>& out_shapes, const std::vector<cl_mem>& in,
               const std::vector<cl_mem>& out) override {
    const Shape &s = in_shapes[0], &o = out_shapes[0];
    std::vector<int> meta(o.begin(), o.end());
    meta.insert(meta.end(), s.begin(), s.end());
    if (meta.empty()) meta.push_back(0);
    meta_ = UploadInts(ctx, meta);
    const int total = static_cast<int>(NumElements(o)), rank = static_cast<int>(o.size());
    Launch l;
    l.name = "tile";
    l.kernel = CreateKernel(*ctx.GetProgram("tile"), l.name);
    SetArgs(l.kernel, in[0], out[0], total, rank, meta_.get());
    l.global[0] = static_cast<size_t>(total);
    launches_.clear();
    launches_.push_back(std::move(l));
  }

 private:
  std::vector<int> multiples_;
  Buffer meta_;
};

std::string ReadMultiples(const GraphView& g, const NodeInfo& node, std::vector<int>* m) {
  if (node.inputs.size() != 2 || node.outputs.size() != 1) return "unexpected input/output count";
  if (auto why = CheckMovedTensors(g, {node.inputs[0], node.outputs[0]}); !why.empty()) return why;
  const Shape s = g.shape(node.inputs[0]);
  if (s.size() > kMaxRank) return "rank above " + std::to_string(kMaxRank);
  std::vector<int64_t> v;
  if (auto why = g.ReadConstantInts(node.inputs[1], "TILE multiples", &v); !why.empty()) return why;
  if (v.size() != s.size()) return "TILE multiples do not match the input's rank";
  for (int64_t x : v) {
    if (x < 0 || x > INT_MAX) return "TILE multiples must be non-negative";
    m->push_back(static_cast<int>(x));
  }
  return "";
}

std::string Check(const GraphView& g, const NodeInfo& node) {
  std::vector<int> m;
  return ReadMultiples(g, node, &m);
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  std::vector<int> m;
  if (auto why = ReadMultiples(g, node, &m); !why.empty()) throw Error(why);
  return std::make_unique<TileOp>(node, std::move(m));
}

}  // namespace

extern const OpHandler kTileHandler = {tfl::kTile, "TILE", Check, Create};

}  // namespace clgpu
