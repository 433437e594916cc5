// Reductions over constant axes: MEAN, SUM, REDUCE_PROD, REDUCE_MAX, REDUCE_MIN
// (kernels/reduce.cl). The reduced axes are canonicalized on the host: size-1 axes dropped and
// neighbours of the same kind merged, so most reductions (global pooling over H, W; layer-norm
// style over the last axis; everything) become one [outer, reduce, inner] view.
#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "ops/int8_ops.h"
#include "ops/op.h"
#include "ops/reduce_tiled.h"
#include "ops/squeeze.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr int kMaxRank = 8;  // kept + reduced dims the general kernel's metadata holds

// TFLite builtin codes, and the RED_OP numbers of kernels/reduce.cl.
struct ReduceKind {
  int32_t code;
  const char* name;
  int op;
  bool mean;
};
constexpr ReduceKind kKinds[] = {
    {tfl::kMean, "MEAN", 0, true},
    {tfl::kSum, "SUM", 0, false},
    {tfl::kReduceProd, "REDUCE_PROD", 1, false},
    {tfl::kReduceMax, "REDUCE_MAX", 2, false},
    {tfl::kReduceMin, "REDUCE_MIN", 3, false},
};

const ReduceKind& KindOf(int32_t code) {
  for (const ReduceKind& k : kKinds)
    if (k.code == code) return k;
  throw Error("not a reduction: " + std::to_string(code));
}

// TfLiteReducerParams.
struct ReducerParams {
  bool keep_dims;
};

// Which axes of a rank-`rank` input the (possibly negative, possibly repeated) axes reduce;
// "" or why they are invalid.
std::string ReducedMask(const std::vector<int64_t>& axes, size_t rank, std::vector<bool>* mask) {
  mask->assign(rank, false);
  for (int64_t a : axes) {
    const int64_t r = static_cast<int64_t>(rank);
    if (a < -r || a >= r)
      return "axis " + std::to_string(a) + " out of range for rank " + std::to_string(rank);
    (*mask)[static_cast<size_t>(a < 0 ? a + r : a)] = true;
  }
  return "";
}

Shape ReducedShape(const Shape& in, const std::vector<bool>& mask, bool keep_dims) {
  Shape out;
  for (size_t a = 0; a < in.size(); ++a) {
    if (!mask[a])
      out.push_back(in[a]);
    else if (keep_dims)
      out.push_back(1);
  }
  return out;
}

// The input as runs of kept / reduced axes: size-1 axes dropped, neighbours of one kind merged.
struct Segment {
  bool reduced;
  int64_t size;
};
std::vector<Segment> Canonical(const Shape& in, const std::vector<bool>& mask) {
  std::vector<Segment> segs;
  for (size_t a = 0; a < in.size(); ++a) {
    if (in[a] == 1) continue;
    if (!segs.empty() && segs.back().reduced == mask[a])
      segs.back().size *= in[a];
    else
      segs.push_back({static_cast<bool>(mask[a]), in[a]});
  }
  return segs;
}

class ReduceOp : public Op, public Chunker, public FoldTarget {
 public:
  ReduceOp(const NodeInfo& node, const ReduceKind& kind, std::vector<int64_t> axes, bool keep_dims)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}),
        kind_(kind),
        axes_(std::move(axes)),
        keep_dims_(keep_dims) {}
  // A chunk: the same reduction of a box of the input (all of its reduced extent).
  explicit ReduceOp(const ReduceOp& whole)
      : Op(whole.node_index()),
        kind_(whole.kind_),
        axes_(whole.axes_),
        keep_dims_(whole.keep_dims_) {}
  const char* type_name() const override { return kind_.name; }
  std::string algorithm() const override { return algorithm_; }
  const Chunker* chunker() const override { return this; }
  const FoldTarget* fold_target() const override { return this; }

  // A MEAN of one image's H and W (one reduced run, one outer row) whose channels fit.
  SqueezeType TakesSqueeze(const Shape& in) const override {
    int64_t outer = 1, reduce = 1, inner = 1;
    const bool takes = kind_.mean && !has_epilogue() && !has_folded_clamp() &&
                       NumElements(in) > 0 && View(in, &outer, &reduce, &inner) <= 1 &&
                       outer == 1 && inner <= kMaxFloatSqueezeVector;
    return takes ? SqueezeType::kFloat : SqueezeType::kNone;
  }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    return {ReducedShape(in[0], Mask(in[0]), keep_dims_)};
  }
  double Flops(const std::vector<Shape>& in, const std::vector<Shape>&) const override {
    return static_cast<double>(NumElements(in[0])) + dense_flops_;
  }

  // Chunks are boxes of the output seen with kept dims: each reads the same box of the input
  // along the kept axes and all of the reduced ones.
  bool GetChunkSpec(const std::vector<Shape>& in, ChunkSpec* spec) const override {
    const std::vector<bool> mask = Mask(in[0]);
    spec->views = {in[0], ReducedShape(in[0], mask, true)};
    for (size_t a = 0; a < in[0].size(); ++a)
      if (!mask[a]) spec->axes.push_back(static_cast<int>(a));
    return true;
  }
  std::vector<Box> ChunkInputs(const std::vector<Shape>& in, const Box& out) const override {
    const std::vector<bool> mask = Mask(in[0]);
    Box b = out;
    for (size_t a = 0; a < mask.size(); ++a)
      if (mask[a]) b.begin[a] = 0, b.size[a] = in[0][a];
    return {b};
  }
  std::unique_ptr<Op> MakeChunk(const std::vector<Shape>&, const Box&) const override {
    return std::make_unique<ReduceOp>(*this);
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes,
               const std::vector<Shape>& out_shapes, const std::vector<cl_mem>& in,
               const std::vector<cl_mem>& out) override {
    launches_.clear();
    const Shape& s = in_shapes[0];
    const int total = static_cast<int>(NumElements(out_shapes[0]));
    if (total == 0) return;  // nothing to compute
    const std::vector<Segment> segs = Canonical(s, Mask(s));
    int64_t count = 1;
    for (const Segment& g : segs)
      if (g.reduced) count *= g.size;
    const float divisor = kind_.mean ? static_cast<float>(count) : 1.0f;
    int64_t outer = 1, reduce = 1, inner = 1;
    const int reduced_runs = View(s, &outer, &reduce, &inner);
    dense_flops_ = 0;
    if (!squeeze_dense().empty()) {
      launches_.push_back(EncodeFoldedFloatSqueeze(
          ctx, *this, in[0], out[0], static_cast<int>(reduce), static_cast<int>(inner), divisor,
          /*bounded=*/false, &squeeze_, &dense_flops_));
      algorithm_ = "squeeze";
      return;
    }
    // Few columns and a short reduced extent would make tiled groups of a few work-items, most
    // of each SIMD lane group idle: one work-item per output does better there.
    if (reduced_runs <= 1 && !TiledReductionIsTiny(reduce, inner)) {
      TiledReduction r;
      r.red_op = kind_.op;
      r.outer = outer, r.reduce = reduce, r.inner = inner;
      r.divisor = divisor;
      r.compute_units = ctx.env.device().compute_units;
      algorithm_ = AppendTiledReduction(ctx, r, in[0], out[0], &launches_);
      return;
    }
    // Strides of the merged runs, then kept runs and reduced runs apart.
    std::vector<int> kdims, kstrides, rdims, rstrides;
    int64_t stride = 1;
    std::vector<int64_t> strides(segs.size());
    for (size_t i = segs.size(); i-- > 0;) strides[i] = stride, stride *= segs[i].size;
    for (size_t i = 0; i < segs.size(); ++i) {
      (segs[i].reduced ? rdims : kdims).push_back(static_cast<int>(segs[i].size));
      (segs[i].reduced ? rstrides : kstrides).push_back(static_cast<int>(strides[i]));
    }
    std::vector<int> meta = kdims;
    meta.insert(meta.end(), kstrides.begin(), kstrides.end());
    meta.insert(meta.end(), rdims.begin(), rdims.end());
    meta.insert(meta.end(), rstrides.begin(), rstrides.end());
    if (meta.empty()) meta.push_back(0);  // all axes of size 1: no zero-byte buffer
    meta_ = UploadInts(ctx, meta);
    Launch l;
    l.name = "reduce_general";
    l.kernel =
        CreateKernel(*ctx.GetProgram("reduce", "-DRED_OP=" + std::to_string(kind_.op)), l.name);
    SetArgs(l.kernel, in[0], out[0], total, static_cast<int>(kdims.size()),
            static_cast<int>(rdims.size()), static_cast<int>(count), divisor, meta_.get());
    l.global[0] = static_cast<size_t>(total);
    algorithm_ = "general";
    launches_.push_back(std::move(l));
  }

  // The kernels Prepare launches for input shape `s` when no squeeze is folded in: two for a
  // split tiled reduction (the cost model's count).
  int PlannedLaunches(const Shape& s, const DeviceInfo& dev) const {
    int64_t outer = 1, reduce = 1, inner = 1;
    if (NumElements(s) == 0 || View(s, &outer, &reduce, &inner) > 1 ||
        TiledReductionIsTiny(reduce, inner))
      return 1;
    TiledReduction r;
    r.red_op = kind_.op;
    r.outer = outer, r.reduce = reduce, r.inner = inner;
    r.compute_units = dev.compute_units;
    return TiledReductionSlices(r) > 1 ? 2 : 1;
  }

 private:
  // [outer, reduce, inner] when there is at most one reduced run, kept runs on either side;
  // returns the number of reduced runs.
  int View(const Shape& s, int64_t* outer, int64_t* reduce, int64_t* inner) const {
    const std::vector<Segment> segs = Canonical(s, Mask(s));
    bool after = false;
    int runs = 0;
    for (const Segment& g : segs) {
      if (g.reduced)
        *reduce = g.size, after = true, ++runs;
      else
        (after ? *inner : *outer) *= g.size;
    }
    return runs;
  }

 public:
  std::vector<size_t> ScratchBytes(const OpContext& ctx,
                                   const std::vector<Shape>& in) const override {
    int64_t outer = 1, reduce = 1, inner = 1;
    if (View(in[0], &outer, &reduce, &inner) > 1 || TiledReductionIsTiny(reduce, inner)) return {};
    TiledReduction r;
    r.red_op = kind_.op;
    r.outer = outer, r.reduce = reduce, r.inner = inner;
    r.compute_units = ctx.env.device().compute_units;
    const size_t bytes = TiledReductionScratchBytes(r, ctx.storage_bytes);
    if (!bytes) return {};
    return {bytes};
  }

 private:
  std::vector<bool> Mask(const Shape& in) const {
    std::vector<bool> mask;
    if (auto why = ReducedMask(axes_, in.size(), &mask); !why.empty())
      throw Error(std::string(kind_.name) + ": " + why);
    return mask;
  }
  const ReduceKind& kind_;
  std::vector<int64_t> axes_;
  bool keep_dims_;
  std::string algorithm_ = "tiled";
  Buffer meta_;
  FloatSqueezeState squeeze_;  // the folded dense ops' launch (ops/squeeze.h)
  double dense_flops_ = 0;
};

std::string Check(const GraphView& g, const NodeInfo& node) {
  if (!node.builtin_data) return std::string("missing ") + KindOf(node.op).name + " params";
  if (node.inputs.size() != 2 || node.outputs.size() != 1) return "unexpected input/output count";
  // Quantized tensors: MEAN only (mean_int8.cc).
  if (g.valid_tensor(node.inputs[0]) && IsQuantized(g.value_type(node.inputs[0])))
    return node.op == tfl::kMean
               ? CheckMeanInt8(g, node)
               : std::string("int8 ") + KindOf(node.op).name + " is not supported";
  if (auto why = CheckFloatTensors(g, {node.inputs[0], node.outputs[0]}); !why.empty()) return why;
  std::vector<int64_t> axes;
  if (auto why = g.ReadConstantInts(node.inputs[1], "axes", &axes); !why.empty()) return why;
  const Shape s = g.shape(node.inputs[0]);
  if (s.empty() || s.size() > kMaxRank) return "rank must be 1-" + std::to_string(kMaxRank);
  std::vector<bool> mask;
  if (auto why = ReducedMask(axes, s.size(), &mask); !why.empty()) return why;
  if (NumElements(s) == 0) return "empty input";
  ReducerParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  const Shape want = ReducedShape(s, mask, p.keep_dims);
  if (g.shape(node.outputs[0]) != want)
    return "output shape " + ShapeString(g.shape(node.outputs[0])) + " is not the reduced shape " +
           ShapeString(want);
  return "";
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  if (IsQuantized(g.value_type(node.inputs[0]))) return CreateMeanInt8(g, node);
  ReducerParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  return std::make_unique<ReduceOp>(node, KindOf(node.op), g.ConstantInts(node.inputs[1]),
                                    p.keep_dims);
}

std::string Describe(const NodeInfo& node) {
  ReducerParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  return "keep_dims=" + std::to_string(int(p.keep_dims));
}

// One operation per input element.
double Work(const GraphView& g, const NodeInfo& n) {
  if (n.inputs.empty() || !g.valid_tensor(n.inputs[0])) return 0;
  return static_cast<double>(NumElements(g.shape(n.inputs[0])));
}

// The float reduction's kernels (int8 MEAN plans its own: counted as one); a MEAN running a
// folded squeeze is counted by the cost model (one launch).
LaunchCount Launches(const GraphView& g, const NodeInfo& n, const DeviceInfo& dev) {
  if (!Check(g, n).empty() || IsQuantized(g.value_type(n.inputs[0]))) return {};
  const std::unique_ptr<Op> op = Create(g, n);
  return {static_cast<const ReduceOp&>(*op).PlannedLaunches(g.shape(n.inputs[0]), dev)};
}

}  // namespace

extern const OpHandler kMeanHandler = {tfl::kMean, "MEAN", Check, Create,  Describe,
                                       Work,       false,  false, Launches};
extern const OpHandler kSumHandler = {tfl::kSum, "SUM", Check, Create,  Describe,
                                      Work,      false, false, Launches};
extern const OpHandler kReduceProdHandler = {
    tfl::kReduceProd, "REDUCE_PROD", Check, Create, Describe, Work, false, false, Launches};
extern const OpHandler kReduceMaxHandler = {
    tfl::kReduceMax, "REDUCE_MAX", Check, Create, Describe, Work, false, false, Launches};
extern const OpHandler kReduceMinHandler = {
    tfl::kReduceMin, "REDUCE_MIN", Check, Create, Describe, Work, false, false, Launches};

}  // namespace clgpu
