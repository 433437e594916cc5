// BATCH_MATMUL: out[..., M, N] = x[..., M, K] y[..., K, N] (adj_x / adj_y: the operand stored
// with its last two axes swapped), batch axes broadcast numpy-style, ranks 2 to 5, either operand
// a constant or computed at run time. One strided batched GEMM (kernels/batch_matmul.cl) on the
// project's GEMM tiles; operands and output may be views folded in from TRANSPOSE / RESHAPE
// chains around it (ops/matmul_views.h).
#include <algorithm>
#include <climits>
#include <cstring>

#include "cl/errors.h"
#include "common/error.h"
#include "ops/hybrid_weights.h"
#include "ops/op.h"
#include "ops/tuning.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr int kMaxRank = 5;

// TfLiteBatchMatMulParams (the same in both runtimes).
struct BatchMatMulParams {
  bool adj_x, adj_y, asymmetric_quantize_inputs;
};

BatchMatMulParams ReadParams(const NodeInfo& node) {
  BatchMatMulParams p{false, false, false};
  if (node.builtin_data) std::memcpy(&p, node.builtin_data, sizeof p);
  return p;
}

// The output shape as TFLite's kernel gives it; "" or why there is none.
std::string OutputShape(const Shape& x, const Shape& y, bool adj_x, bool adj_y, Shape* out) {
  const int rx = static_cast<int>(x.size()), ry = static_cast<int>(y.size());
  if (rx < 2 || ry < 2 || rx > kMaxRank || ry > kMaxRank)
    return "operands " + ShapeString(x) + " and " + ShapeString(y) + " are not of rank 2 to 5";
  const int k_x = adj_x ? x[rx - 2] : x[rx - 1], k_y = adj_y ? y[ry - 1] : y[ry - 2];
  if (k_x != k_y) return "operands " + ShapeString(x) + " and " + ShapeString(y) + " disagree on K";
  const int r = std::max(rx, ry);
  out->assign(r, 1);
  for (int a = 0; a < r - 2; ++a) {
    const int ax = a - (r - rx), ay = a - (r - ry);
    const int dx = ax >= 0 ? x[ax] : 1, dy = ay >= 0 ? y[ay] : 1;
    if (dx != dy && dx != 1 && dy != 1)
      return "batch axes of " + ShapeString(x) + " and " + ShapeString(y) + " do not broadcast";
    (*out)[a] = dx == 1 ? dy : dx;
  }
  (*out)[r - 2] = adj_x ? x[rx - 1] : x[rx - 2];
  (*out)[r - 1] = adj_y ? y[ry - 2] : y[ry - 1];
  return "";
}

// cl_int8 of up to eight strides; false if one is out of int range.
bool PackStrides(const std::vector<int64_t>& v, cl_int8* out) {
  for (int i = 0; i < 8; ++i) {
    const int64_t s = i < static_cast<int>(v.size()) ? v[i] : 0;
    if (s < 0 || s > INT_MAX) return false;
    out->s[i] = static_cast<cl_int>(s);
  }
  return true;
}

// How a tile of an operand with row stride rs and k stride ks is read (kernels/batch_matmul.cl).
int ReadMode(const std::vector<int64_t>& strides, int64_t rs, int64_t ks, int rows, int k) {
  bool others4 = true;
  for (int64_t s : strides) others4 = others4 && s % 4 == 0;
  if (ks == 1 && k % 4 == 0 && rs % 4 == 0 && others4) return 1;
  if (rs == 1 && rows % 4 == 0 && ks % 4 == 0 && others4) return 2;
  return rs == 1 ? 3 : 0;
}

class BatchMatMulOp : public Op, public Chunker, public FoldTarget {
 public:
  BatchMatMulOp(const NodeInfo& node, const BatchMatMulParams& p)
      : Op(node, {node.inputs[0], node.inputs[1]}, {node.outputs[0]}),
        adj_x_(p.adj_x),
        adj_y_(p.adj_y) {}
  // A chunk: the same product over boxes of the batch axes and of M.
  explicit BatchMatMulOp(const BatchMatMulOp& whole)
      : Op(whole.node_index()), adj_x_(whole.adj_x_), adj_y_(whole.adj_y_) {}

  const char* type_name() const override { return "BATCH_MATMUL"; }
  std::string algorithm() const override { return algorithm_; }
  const Chunker* chunker() const override { return this; }
  const FoldTarget* fold_target() const override { return this; }
  bool TakesViews() const override { return true; }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    Shape out;
    if (auto why = OutputShape(in.at(0), in.at(1), adj_x_, adj_y_, &out); !why.empty())
      throw Error("BATCH_MATMUL: " + why);
    return {out};
  }

  double Flops(const std::vector<Shape>& in, const std::vector<Shape>&) const override {
    const Shape x = Logical(0, in), y = Logical(1, in);
    Shape out;
    if (!OutputShape(x, y, adj_x_, adj_y_, &out).empty()) return 0;
    return 2.0 * double(NumElements(out)) * (adj_x_ ? x[x.size() - 2] : x.back());
  }

  // Chunks are boxes of the output's batch axes and rows (M): x's matching box, all of K; y's
  // batch box, all of K and N. Not with views folded in (their tensors fit one buffer).
  bool GetChunkSpec(const std::vector<Shape>& in, ChunkSpec* spec) const override {
    if (input_view(0) || input_view(1) || output_view()) return false;
    const std::vector<Shape> out = InferShapes(in);
    spec->views = {in[0], in[1], out[0]};
    for (int a = 0; a + 1 < static_cast<int>(out[0].size()); ++a) spec->axes.push_back(a);
    return true;
  }
  std::vector<Box> ChunkInputs(const std::vector<Shape>& in, const Box& out) const override {
    const int r = static_cast<int>(out.begin.size());
    std::vector<Box> boxes;
    for (int j = 0; j < 2; ++j) {
      const Shape& s = in[j];
      const int rs = static_cast<int>(s.size());
      Box b{std::vector<int>(rs, 0), s};
      for (int a = 0; a < rs - 2; ++a) {
        const int d = a + (r - rs);
        if (s[a] != 1) b.begin[a] = out.begin[d], b.size[a] = out.size[d];
      }
      if (j == 0) {
        const int m_axis = adj_x_ ? rs - 1 : rs - 2;
        b.begin[m_axis] = out.begin[r - 2], b.size[m_axis] = out.size[r - 2];
      }
      boxes.push_back(std::move(b));
    }
    return boxes;
  }
  std::unique_ptr<Op> MakeChunk(const std::vector<Shape>&, const Box&) const override {
    return std::make_unique<BatchMatMulOp>(*this);
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes, const std::vector<Shape>&,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& out) override {
    launches_.clear();
    const Shape x = Logical(0, in_shapes), y = Logical(1, in_shapes);
    Shape o;
    if (auto why = OutputShape(x, y, adj_x_, adj_y_, &o); !why.empty())
      throw Error("BATCH_MATMUL: " + why);
    const StridedView xv = input_view(0) ? *input_view(0) : ContiguousView(x);
    const StridedView yv = input_view(1) ? *input_view(1) : ContiguousView(y);
    const StridedView cv = output_view() ? *output_view() : ContiguousView(o);
    if (cv.shape != o)
      throw Error("BATCH_MATMUL output view " + ShapeString(cv.shape) +
                  " does not match its output " + ShapeString(o));
    const int r = static_cast<int>(o.size()), rx = static_cast<int>(x.size()),
              ry = static_cast<int>(y.size());
    const int m = o[r - 2], n = o[r - 1], k = adj_x_ ? x[rx - 2] : x[rx - 1];
    int64_t batch = 1;
    for (int a = 0; a < r - 2; ++a) batch *= o[a];
    if (batch == 0 || m == 0 || n == 0) return;  // an empty output: nothing to compute

    // Batch slots i0, i1, i2 (the output's batch axes, right-aligned); a broadcast axis of
    // an operand (extent 1) has stride 0.
    std::vector<int64_t> sa(5, 0), sb(5, 0), sc(5, 0);
    int e[3] = {1, 1, 1};
    for (int d = 0; d < r - 2; ++d) {
      const int slot = 3 - (r - 2) + d;
      e[slot] = o[d];
      const int ax = d - (r - rx), ay = d - (r - ry);
      if (ax >= 0 && x[ax] != 1) sa[slot] = xv.strides[ax];
      if (ay >= 0 && y[ay] != 1) sb[slot] = yv.strides[ay];
      sc[slot] = cv.strides[d];
    }
    sa[3] = xv.strides[adj_x_ ? rx - 1 : rx - 2], sa[4] = xv.strides[adj_x_ ? rx - 2 : rx - 1];
    sb[3] = yv.strides[adj_y_ ? ry - 2 : ry - 1], sb[4] = yv.strides[adj_y_ ? ry - 1 : ry - 2];
    sc[3] = cv.strides[r - 2], sc[4] = cv.strides[r - 1];
    cl_int8 pa, pb, pc;
    if (!PackStrides(sa, &pa) || !PackStrides(sb, &pb) || !PackStrides(sc, &pc) || batch > INT_MAX)
      throw Error("BATCH_MATMUL strides exceed the kernel's int range");

    const std::vector<int64_t> batch_a(sa.begin(), sa.begin() + 3),
        batch_b(sb.begin(), sb.begin() + 3), batch_c(sc.begin(), sc.begin() + 3);
    const int a_mode = ReadMode(batch_a, sa[3], sa[4], m, k);
    const int b_mode = ReadMode(batch_b, sb[3], sb[4], n, k);
    bool c_vec = sc[4] == 1 && n % 4 == 0 && sc[3] % 4 == 0;
    for (int64_t s : batch_c) c_vec = c_vec && s % 4 == 0;

    // Bigger tiles reuse loaded values more, but only pay once they give every compute unit
    // a couple of groups.
    const DeviceInfo& dev = ctx.env.device();
    GemmTiles t = TilesFor("batch_matmul", dev);
    if (t.Groups(m, n) * batch < 2L * dev.compute_units) t = TilesFor("batch_matmul_small", dev);
    const bool even = m % t.tile_m == 0 && n % t.tile_n == 0 && k % t.tile_k == 0;
    auto prog = ctx.GetProgram("batch_matmul", t.Defines() + " -DA_MODE=" + std::to_string(a_mode) +
                                                   " -DB_MODE=" + std::to_string(b_mode) +
                                                   " -DC_VEC=" + std::to_string(int(c_vec)) +
                                                   (even ? " -DGEMM_EVEN=1" : ""));
    Launch l;
    l.name = "batch_matmul";
    l.kernel = CreateKernel(*prog, l.name);
    l.dims = 2;
    l.global[0] = t.Global(m, n);
    l.global[1] = static_cast<size_t>(batch);
    l.local[0] = t.work_group();
    l.local[1] = 1;
    SetArgs(l.kernel, in[0], in[1], out[0], m, n, k, output_scale(), pa, pb, pc, e[1], e[2]);
    launches_.push_back(std::move(l));
    algorithm_ = "gemm_batched";
    if (input_view(0) || input_view(1) || output_view()) algorithm_ += "+views";
  }

 private:
  // Operand i as the op sees it: its folded view's shape, or the tensor's own.
  Shape Logical(size_t i, const std::vector<Shape>& in) const {
    return input_view(i) ? input_view(i)->shape : in.at(i);
  }

  bool adj_x_, adj_y_;
  std::string algorithm_ = "gemm_batched";
};

std::string Check(const GraphView& g, const NodeInfo& node) {
  if (node.inputs.size() != 2 || node.outputs.size() != 1) return "unexpected input/output count";
  // An int8 y with a float x: dynamic-range weights, run in float (ops/hybrid_weights.h).
  if (auto why = CheckHybridWeights(g, node); !why.empty()) return why;
  if (auto why = CheckFloatTensors(g, {node.inputs[0], node.inputs[1], node.outputs[0]});
      !why.empty())
    return why;
  const BatchMatMulParams p = ReadParams(node);
  Shape out;
  return OutputShape(g.shape(node.inputs[0]), g.shape(node.inputs[1]), p.adj_x, p.adj_y, &out);
}

std::unique_ptr<Op> Create(const GraphView&, const NodeInfo& node) {
  return std::make_unique<BatchMatMulOp>(node, ReadParams(node));
}

std::string Describe(const NodeInfo& node) {
  const BatchMatMulParams p = ReadParams(node);
  return "adj_x=" + std::to_string(int(p.adj_x)) + " adj_y=" + std::to_string(int(p.adj_y));
}

// 2 x output elements x K.
double Work(const GraphView& g, const NodeInfo& n) {
  if (n.inputs.size() != 2 || n.outputs.empty() || !g.valid_tensor(n.inputs[0]) ||
      !g.valid_tensor(n.outputs[0]))
    return 0;
  const Shape x = g.shape(n.inputs[0]);
  if (x.size() < 2) return 0;
  const double k = ReadParams(n).adj_x ? x[x.size() - 2] : x.back();
  return 2.0 * double(NumElements(g.shape(n.outputs[0]))) * k;
}

}  // namespace

extern const OpHandler kBatchMatMulHandler = {tfl::kBatchMatMul, "BATCH_MATMUL", Check, Create,
                                              Describe,          Work,           false, false,
                                              nullptr,           false,          0,     true};

}  // namespace clgpu
