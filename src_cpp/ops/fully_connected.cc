// FULLY_CONNECTED: any leading dims (flattened to rows), keep_num_dims both ways, weights a
// constant (uploaded once) or computed at run time (read from their device buffer).
#include <cstring>
#include <map>
#include <tuple>
#include <utility>

#include "common/error.h"
#include "graph/validate.h"
#include "ops/dense_chain.h"
#include "ops/gemm.h"
#include "ops/hybrid_weights.h"
#include "ops/int8_ops.h"
#include "ops/op.h"
#include "ops/squeeze.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// The weights [N, K] and bias on the host and their device copies per range of N,
// shared by the op and its chunks. Run-time weights: no host copy, only the bias is uploaded.
struct FullyConnectedSource {
  int n = 0, k = 0;
  bool runtime_weights = false;
  bool has_bias = false;  // else zeros, as many as a plan's N
  LazyConstant weights;
  float max_abs = -1.0f;  // the largest |weight|, once the weights are read (EncodeGemm)
  std::vector<float> bias;
  std::map<std::pair<int, int>, std::pair<Buffer, Buffer>> buffers;  // (n0, count) -> weights, bias

  const std::pair<Buffer, Buffer>& Get(OpContext& ctx, int n0, int count) {
    auto& b = buffers[{n0, count}];
    if (b.second) return b;
    if (runtime_weights) {
      b.second = UploadFloat32(
          ctx, has_bias ? std::vector<float>(bias.begin() + n0, bias.begin() + n0 + count)
                        : std::vector<float>(count, 0.f));
      return b;
    }
    const std::vector<float>& w = weights.values();
    if (max_abs < 0) max_abs = MaxAbs(w);
    if (n0 == 0 && count == n) {
      b.first = UploadWeights(ctx, w);
      b.second = UploadFloat32(ctx, bias);
      return b;
    }
    b.first = UploadWeights(
        ctx, std::vector<float>(w.begin() + size_t(n0) * k, w.begin() + size_t(n0 + count) * k));
    b.second = UploadFloat32(ctx, std::vector<float>(bias.begin() + n0, bias.begin() + n0 + count));
    return b;
  }
  size_t Bytes() const {
    size_t total = 0;
    for (const auto& [key, b] : buffers) total += b.first.bytes() + b.second.bytes();
    return total;
  }
};

class FullyConnectedOp : public Op, public Chunker, public FoldTarget, public FoldSource {
 public:
  FullyConnectedOp(const GraphView& g, const NodeInfo& node, const tfl::FullyConnectedParams& p)
      : Op(node, Operands(g, node), {node.outputs[0]}),
        keep_num_dims_(p.keep_num_dims),
        src_(std::make_shared<FullyConnectedSource>()) {
    const Shape w = g.shape(node.inputs[1]);
    src_->n = w[0], src_->k = w[1];
    n_ = w[0], k_ = w[1];
    src_->runtime_weights = !g.IsConstant(node.inputs[1]);
    if (!src_->runtime_weights) src_->weights = LazyConstant(g, node.inputs[1]);
    src_->has_bias = node.inputs.size() > 2 && node.inputs[2] >= 0;
    if (src_->has_bias) {
      src_->bias = g.ConstantFloats(node.inputs[2]);
    } else {
      src_->bias.assign(n_, 0.f);
    }
    ActivationRange(p.activation, &act_min_, &act_max_);
  }
  // A chunk: rows of [M, K] in, outputs [n0, n0 + n) out.
  FullyConnectedOp(const FullyConnectedOp& whole, int n0, int n)
      : Op(whole.node_index()),
        keep_num_dims_(false),
        src_(whole.src_),
        chunk_(true),
        n0_(n0),
        n_(n),
        k_(whole.k_) {
    // A chunk clamps as its whole op does, a folded clamp included.
    std::tie(act_min_, act_max_) = whole.ClampBounds(whole.act_min_, whole.act_max_);
  }

  // The input, and the weights when they are computed at run time.
  static std::vector<int> Operands(const GraphView& g, const NodeInfo& node) {
    if (g.IsConstant(node.inputs[1])) return {node.inputs[0]};
    return {node.inputs[0], node.inputs[1]};
  }

  const char* type_name() const override { return "FULLY_CONNECTED"; }
  std::string algorithm() const override { return algorithm_; }
  const Chunker* chunker() const override { return this; }
  const FoldTarget* fold_target() const override { return this; }
  FoldSource* fold_source() override { return this; }
  bool GetClamp(float* lo, float* hi) const override {
    *lo = act_min_, *hi = act_max_;
    return true;
  }
  // Its GEMM applies per-column slopes where it stores (a folded PRELU, fusion/prelu.cc): every
  // kernel of EncodeGemm, the small-M one of a batch-1 layer too.
  bool TakesSlopes(const OpContext&, const std::vector<Shape>& in) const override {
    return !chunk_ && !chained() && !in.empty() && !in[0].empty();
  }

  // With a dense chain (fusion/dense_chain.cc) input 0 is the chain's first layer's input: the
  // shapes as the op's own layer reads them.
  bool chained() const { return !dense_chain().layers.empty(); }
  std::vector<Shape> Own(std::vector<Shape> in) const {
    if (chained() && !in.empty()) in[0] = dense_chain().own;
    return in;
  }

  // N and K: the weights' (run-time weights: as the plan gives them, whatever was declared).
  std::pair<int, int> NK(const std::vector<Shape>& in) const {
    if (!src_->runtime_weights || chained()) return {n_, k_};
    const Shape& w = in.at(1);
    if (w.size() != 2 || w[1] <= 0)
      throw Error("FULLY_CONNECTED run-time weights " + ShapeString(w) + " are not [N, K > 0]");
    // A bias (a constant) fixes N.
    if (!chunk_ && src_->has_bias && w[0] != src_->n)
      throw Error("FULLY_CONNECTED run-time weights " + ShapeString(w) + " do not fit its " +
                  std::to_string(src_->n) + " biases");
    return {w[0], w[1]};
  }
  int Rows(const std::vector<Shape>& in) const {
    const int k = NK(in).second;
    const int64_t total = NumElements(Own(in).at(0));
    if (k <= 0 || total % k != 0)
      throw Error("FULLY_CONNECTED input " + ShapeString(in[0]) +
                  " is not a multiple of K=" + std::to_string(k));
    return static_cast<int>(total / k);
  }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in_as_read) const override {
    const std::vector<Shape> in = Own(in_as_read);
    const auto [n, k] = NK(in);
    const int m = Rows(in);
    if (keep_num_dims_) {
      if (in[0].empty() || in[0].back() != k)
        throw Error("FULLY_CONNECTED keep_num_dims needs the last input dim == K");
      Shape out = in[0];
      out.back() = n;
      return {out};
    }
    return {{m, n}};
  }

  double WeightBytes() const override {
    if (!chunk_) return double(src_->Bytes());
    return buffers_ ? double(buffers_->first.bytes() + buffers_->second.bytes()) : 0.0;
  }

  double Flops(const std::vector<Shape>& in, const std::vector<Shape>&) const override {
    const auto [n, k] = NK(in);
    return 2.0 * Rows(in) * n * k;
  }

  std::vector<size_t> ScratchBytes(const OpContext& ctx,
                                   const std::vector<Shape>& in) const override {
    const int m = Rows(in);
    const auto [n, k] = NK(in);
    const size_t bytes =
        GemmScratchBytes(PlanGemm(ctx.env.device(), m, n, k, ctx.options.gemm_splits), m, n);
    return bytes ? std::vector<size_t>{bytes} : std::vector<size_t>{};
  }

  // One row in, constant weights: the vector a squeeze's MEAN (or the dense op before) leaves.
  bool GetFloatDense(OpContext& ctx, const Shape& in, FloatDense* dense) override {
    // A squeeze's kernel applies a clamp and an epilogue, no slopes.
    if (chunk_ || chained() || has_residual() || has_slopes() || src_->runtime_weights ||
        NumElements(in) != k_)
      return false;
    const std::pair<Buffer, Buffer>& b = src_->Get(ctx, 0, n_);
    dense->weights = b.first.get();
    dense->bias = b.second.get();
    dense->n = n_, dense->k = k_;
    std::tie(dense->act_min, dense->act_max) = ClampBounds(act_min_, act_max_);
    dense->epilogue = epilogue_defines();
    return true;
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes, const std::vector<Shape>&,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& out) override {
    if (chained()) {
      // The layers before, then its own, each as the squeeze's dense ops take them.
      std::vector<FloatDense> layers;
      for (const Attachments::DenseChain::Layer& l : dense_chain().layers) {
        layers.emplace_back();
        if (!l.op->fold_source()->GetFloatDense(ctx, l.shape, &layers.back()))
          throw Error("FULLY_CONNECTED: its dense chain no longer fits its kernel");
      }
      FloatDense own;
      std::tie(own.act_min, own.act_max) = ClampBounds(act_min_, act_max_);
      buffers_ = &src_->Get(ctx, 0, n_);
      own.weights = buffers_->first.get(), own.bias = buffers_->second.get();
      own.n = n_, own.k = k_, own.epilogue = epilogue_defines();
      layers.push_back(own);
      launches_ = EncodeDenseChain(ctx, layers, in[0], out[0]);
      if (launches_.empty())
        throw Error("FULLY_CONNECTED: this device cannot run its dense chain's group");
      algorithm_ = "dense_chain";
      return;
    }
    const int m = Rows(in_shapes);
    const auto [n, k] = NK(in_shapes);
    buffers_ = &src_->Get(ctx, n0_, n);
    cl_mem w = src_->runtime_weights ? in.at(1) : buffers_->first.get();
    cl_mem bias = buffers_->second.get();
    const GemmPlan p = PlanGemm(ctx.env.device(), m, n, k, ctx.options.gemm_splits);
    const auto [lo, hi] = ClampBounds(act_min_, act_max_);
    launches_ = EncodeGemm(ctx, p, in[0], w, bias, out[0], m, n, k, lo, hi, nullptr,
                           src_->runtime_weights ? -1.0f : src_->max_abs,
                           has_slopes() ? in.back() : nullptr);
    algorithm_ = std::string(GemmAlgorithm(p)) + (has_slopes() ? "+PRELU" : "");
  }

  // Chunks see the input as [M, K] and the output as [M, N]: rows of M, ranges of N.
  // Run-time weights are one more input, [N, K], cut by ranges of N like uploaded ones.
  bool GetChunkSpec(const std::vector<Shape>& in, ChunkSpec* spec) const override {
    if (chained()) return false;
    const int m = Rows(in);
    const auto [n, k] = NK(in);
    spec->views = {{m, k}, {m, n}};
    if (src_->runtime_weights) spec->views.insert(spec->views.begin() + 1, Shape{n, k});
    if (!src_->runtime_weights) spec->weight_axes = {1};
    spec->axes = {0, 1};
    return true;
  }
  std::vector<Box> ChunkInputs(const std::vector<Shape>& in, const Box& out) const override {
    const int k = NK(in).second;
    std::vector<Box> boxes = {Box{{out.begin[0], 0}, {out.size[0], k}}};
    if (src_->runtime_weights) boxes.push_back(Box{{out.begin[1], 0}, {out.size[1], k}});
    return boxes;
  }
  size_t ChunkWeightBytes(const OpContext& ctx, const std::vector<Shape>&,
                          const Box& out) const override {
    return src_->runtime_weights ? 0 : size_t(out.size[1]) * k_ * ctx.storage_bytes;
  }
  std::unique_ptr<Op> MakeChunk(const std::vector<Shape>&, const Box& out) const override {
    return std::make_unique<FullyConnectedOp>(*this, n0_ + out.begin[1], out.size[1]);
  }

 private:
  std::string algorithm_ = "gemm";
  bool keep_num_dims_;
  std::shared_ptr<FullyConnectedSource> src_;
  bool chunk_ = false;
  int n0_ = 0;  // a chunk's first output
  int n_ = 0, k_ = 0;
  float act_min_ = 0, act_max_ = 0;
  const std::pair<Buffer, Buffer>* buffers_ = nullptr;  // weights, bias in src_
};

std::string Check(const GraphView& g, const NodeInfo& node) {
  if (!node.builtin_data) return "missing FULLY_CONNECTED params";
  if (auto why = CheckInputs(node, "FULLY_CONNECTED", 2, 1); !why.empty()) return why;
  if (auto why = CheckOutputs(node, "FULLY_CONNECTED", 1); !why.empty()) return why;
  tfl::FullyConnectedParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  float lo, hi;
  if (!ActivationRange(p.activation, &lo, &hi))
    return "fused activation " + std::to_string(p.activation) +
           " (TFLite's FULLY_CONNECTED kernel refuses it: the model fails on the CPU too)";
  if (p.weights_format != 0) return "shuffled weights format";
  // int8 weights with a float input: dynamic-range ones, run in float (ops/hybrid_weights.h).
  if (auto why = CheckHybridWeights(g, node); !why.empty()) return why;
  // int8 tensors: fully_connected_int8.cc.
  if (g.valid_tensor(node.inputs[0]) && IsQuantized(g.value_type(node.inputs[0])))
    return g.valid_tensor(node.inputs[1]) && g.valid_tensor(node.outputs[0])
               ? CheckFullyConnectedInt8(g, node)
               : "invalid tensor index";
  std::vector<int> tensors = {node.inputs[0], node.inputs[1], node.outputs[0]};
  const bool has_bias = node.inputs.size() > 2 && node.inputs[2] >= 0;
  if (has_bias) tensors.push_back(node.inputs[2]);
  if (auto why = CheckFloatTensors(g, tensors); !why.empty()) return why;
  if (has_bias && !g.IsConstant(node.inputs[2])) return "bias is computed at run time";
  const Shape w = g.shape(node.inputs[1]);
  if (w.size() != 2 || w[1] <= 0) return "weights must be 2-D [N, K] with K > 0";
  if (NumElements(g.shape(node.inputs[0])) % w[1] != 0) return "input size is not a multiple of K";
  if (has_bias && NumElements(g.shape(node.inputs[2])) != w[0]) return "bias size != N";
  return "";
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  if (IsQuantized(g.value_type(node.inputs[0]))) return CreateFullyConnectedInt8(g, node);
  tfl::FullyConnectedParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  return std::make_unique<FullyConnectedOp>(g, node, p);
}

std::string Describe(const NodeInfo& n) {
  tfl::FullyConnectedParams p;
  std::memcpy(&p, n.builtin_data, sizeof p);
  return "act=" + std::to_string(p.activation) +
         " weights_format=" + std::to_string(p.weights_format) +
         " keep_num_dims=" + std::to_string(int(p.keep_num_dims));
}

double Work(const GraphView& g, const NodeInfo& n) { return FilterWork(g, n, 0); }

// The float GEMM's kernels (its plan, as Prepare makes it): two when it splits K. int8 plans
// its own: counted as one.
LaunchCount Launches(const GraphView& g, const NodeInfo& n, const DeviceInfo& dev) {
  if (n.inputs.size() < 2 || !g.valid_tensor(n.inputs[0]) || !g.valid_tensor(n.inputs[1]) ||
      IsQuantized(g.value_type(n.inputs[0])))
    return {};
  const Shape w = g.shape(n.inputs[1]);
  if (w.size() != 2 || w[1] <= 0) return {};
  const long m = long(NumElements(g.shape(n.inputs[0])) / w[1]);
  return {PlanGemm(dev, m, w[0], w[1]).splits > 1 ? 2 : 1};
}

}  // namespace

// The handler's fields in order (ops/op_handler.h), a few lines rather than one a field.
// clang-format off
extern const OpHandler kFullyConnectedHandler = [] {
  OpHandler h{tfl::kFullyConnected, "FULLY_CONNECTED", Check, Create, Describe, Work, false, true,
              Launches, false, 0, true};
  h.cpu_handoff = CpuHandoff::kFullyConnected;
  h.cpu_hybrid_converts = true;
  return h;
}();
// clang-format on

}  // namespace clgpu
