// TRANSPOSE with a constant permutation, ranks 1-6.
#include <algorithm>

#include "common/error.h"
#include "ops/op.h"
#include "ops/quant.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr int kMaxRank = 6;

// The permutation reduced to what matters: size-1 axes dropped, and input axes
// that stay adjacent in the output merged. {1,0} and {0,2,1} are (batched) 2-D
// transposes.
struct Reduced {
  std::vector<int> shape;  // input order
  std::vector<int> perm;
};

Reduced Reduce(const Shape& s, const std::vector<int>& perm) {
  std::vector<int> kept;  // output order, input axis ids
  for (int p : perm)
    if (s[p] != 1) kept.push_back(p);
  // Runs of consecutive input axes become one axis.
  std::vector<std::vector<int>> groups;
  for (int p : kept) {
    if (!groups.empty() && groups.back().back() + 1 == p) {
      groups.back().push_back(p);
    } else {
      groups.push_back({p});
    }
  }
  std::vector<size_t> order(groups.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return groups[a][0] < groups[b][0]; });
  Reduced r;
  std::vector<int> rank_of(groups.size());
  for (size_t i = 0; i < order.size(); ++i) {
    rank_of[order[i]] = static_cast<int>(i);
    int n = 1;
    for (int a : groups[order[i]]) n *= s[a];
    r.shape.push_back(n);
  }
  for (size_t g = 0; g < groups.size(); ++g) r.perm.push_back(rank_of[g]);
  return r;
}

class TransposeOp : public Op, public Chunker {
 public:
  TransposeOp(const NodeInfo& node, std::vector<int> perm)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}), perm_(std::move(perm)) {}

  // A chunk: the same permutation of a box of the input.
  explicit TransposeOp(const TransposeOp& whole) : Op(whole.node_index()), perm_(whole.perm_) {}

  const char* type_name() const override { return "TRANSPOSE"; }
  std::string algorithm() const override { return chained() ? "gather_chain" : algorithm_; }
  // A chained op runs whole (fusion/gathers.cc checked it fits).
  const Chunker* chunker() const override { return chained() ? nullptr : this; }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    if (in[0].size() != perm_.size())
      throw Error("TRANSPOSE input " + ShapeString(in[0]) + " does not match the permutation");
    Shape out(perm_.size());
    for (size_t i = 0; i < perm_.size(); ++i) out[i] = in[0][perm_[i]];
    return {out};
  }
  double Flops(const std::vector<Shape>&, const std::vector<Shape>&) const override { return 0; }
  bool IndexStageOf(const Shape& in, const Shape& out, IndexStage* stage) const override {
    if (in.size() != perm_.size() || out.size() != in.size()) return false;
    *stage = TransposeStage(in, out, perm_);
    return true;
  }

  // Output axis i reads input axis perm[i]: a box of the output reads the box of the
  // input with the same ranges, permuted.
  bool GetChunkSpec(const std::vector<Shape>& in, ChunkSpec* spec) const override {
    spec->views = {in[0], InferShapes(in)[0]};
    for (size_t a = 0; a < perm_.size(); ++a) spec->axes.push_back(static_cast<int>(a));
    return true;
  }
  std::vector<Box> ChunkInputs(const std::vector<Shape>&, const Box& out) const override {
    Box b = out;
    for (size_t i = 0; i < perm_.size(); ++i) {
      b.begin[perm_[i]] = out.begin[i];
      b.size[perm_[i]] = out.size[i];
    }
    return {b};
  }
  std::unique_ptr<Op> MakeChunk(const std::vector<Shape>&, const Box&) const override {
    return std::make_unique<TransposeOp>(*this);
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes,
               const std::vector<Shape>& out_shapes, const std::vector<cl_mem>& in,
               const std::vector<cl_mem>& out) override {
    if (PrepareChain(ctx, out_shapes[0], in, out)) return;
    const Shape& s = in_shapes[0];
    const int total = static_cast<int>(NumElements(s));
    const Reduced r = Reduce(s, perm_);
    int batch = 0, rows = 0, cols = 0;
    if (r.perm == std::vector<int>{1, 0}) {
      batch = 1, rows = r.shape[0], cols = r.shape[1];
    } else if (r.perm == std::vector<int>{0, 2, 1}) {
      batch = r.shape[0], rows = r.shape[1], cols = r.shape[2];
    }
    launches_.clear();
    Launch l;
    l.dims = 1;
    // Tiles of a 2-D transpose are mostly empty with very few rows or columns.
    if (batch > 0 && rows >= 8 && cols >= 8) {
      auto prog = ctx.GetProgram("transpose_tiled");
      l.name = "transpose_batched_2d";
      l.kernel = CreateKernel(*prog, l.name);
      SetArgs(l.kernel, in[0], out[0], batch, rows, cols);
      l.local[0] = kTile * kRows;
      l.global[0] = size_t(batch) * ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile) *
                    kTile * kRows;
      algorithm_ = "tiled_2d";
    } else {
      // Output dims, then per output axis the input stride it walks: the op's own index stage.
      const int rank = static_cast<int>(s.size());
      const std::vector<int> coef = TransposeStage(s, out_shapes[0], perm_).coef;
      std::vector<int> meta(out_shapes[0].begin(), out_shapes[0].end());
      meta.insert(meta.end(), coef.begin(), coef.end());
      meta_ = UploadInts(ctx, meta);
      auto prog = ctx.GetProgram("transpose");
      l.name = "transpose_nd";
      l.kernel = CreateKernel(*prog, l.name);
      SetArgs(l.kernel, in[0], out[0], total, rank, meta_.get());
      l.global[0] = RoundUp(static_cast<size_t>(std::max(total, 1)), 64);
      algorithm_ = "gather";
    }
    launches_.push_back(std::move(l));
  }

 private:
  static constexpr size_t kTile = 32, kRows = 4;  // transpose_tiled.cl defaults
  std::vector<int> perm_;
  std::string algorithm_ = "gather";
  Buffer meta_;
};

std::string Check(const GraphView& g, const NodeInfo& node) {
  if (node.inputs.size() != 2 || node.outputs.size() != 1) return "unexpected input/output count";
  if (auto why = CheckMovedTensors(g, {node.inputs[0], node.outputs[0]}); !why.empty()) return why;
  std::vector<int64_t> perm;
  if (auto why = g.ReadConstantInts(node.inputs[1], "permutation", &perm); !why.empty()) return why;
  const Shape s = g.shape(node.inputs[0]);
  if (s.empty() || s.size() > kMaxRank) return "rank must be 1-" + std::to_string(kMaxRank);
  if (perm.size() != s.size()) return "permutation length != rank";
  std::vector<bool> seen(s.size(), false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(s.size()) || seen[p]) return "invalid permutation";
    seen[p] = true;
  }
  return "";
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  std::vector<int> perm;
  for (int64_t p : g.ConstantInts(node.inputs[1])) perm.push_back(static_cast<int>(p));
  return std::make_unique<TransposeOp>(node, std::move(perm));
}

}  // namespace

extern const OpHandler kTransposeHandler = {tfl::kTranspose, "TRANSPOSE", Check, Create};

}  // namespace clgpu
