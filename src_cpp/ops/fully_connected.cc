// FULLY_CONNECTED: any leading dims (flattened to rows), keep_num_dims both ways.
#include <cstring>
#include <map>

#include "common/error.h"
#include "graph/validate.h"
#include "ops/gemm.h"
#include "ops/op.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// The weights [N, K] and bias on the host and their device copies per range of N,
// shared by the op and its chunks.
struct FullyConnectedSource {
  int n = 0, k = 0;
  std::vector<float> weights, bias;
  std::map<std::pair<int, int>, std::pair<Buffer, Buffer>> buffers;  // (n0, count) -> weights, bias

  const std::pair<Buffer, Buffer>& Get(OpContext& ctx, int n0, int count) {
    auto& b = buffers[{n0, count}];
    if (b.first) return b;
    if (n0 == 0 && count == n) {
      b.first = UploadWeights(ctx, weights);
      b.second = UploadFloat32(ctx, bias);
      return b;
    }
    b.first = UploadWeights(ctx, std::vector<float>(weights.begin() + size_t(n0) * k,
                                                    weights.begin() + size_t(n0 + count) * k));
    b.second = UploadFloat32(ctx, std::vector<float>(bias.begin() + n0, bias.begin() + n0 + count));
    return b;
  }
  size_t Bytes() const {
    size_t total = 0;
    for (const auto& [key, b] : buffers) total += b.first.bytes() + b.second.bytes();
    return total;
  }
};

class FullyConnectedOp : public Op {
 public:
  FullyConnectedOp(const GraphView& g, const NodeInfo& node, const tfl::FullyConnectedParams& p)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}),
        keep_num_dims_(p.keep_num_dims),
        src_(std::make_shared<FullyConnectedSource>()) {
    const Shape w = g.shape(node.inputs[1]);
    src_->n = w[0], src_->k = w[1];
    n_ = w[0], k_ = w[1];
    src_->weights = g.ConstantFloats(node.inputs[1]);
    if (node.inputs.size() > 2 && node.inputs[2] >= 0) {
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
        k_(whole.k_),
        act_min_(whole.act_min_),
        act_max_(whole.act_max_) {}

  const char* type_name() const override { return "FULLY_CONNECTED"; }
  std::string algorithm() const override { return algorithm_; }
  bool GetClamp(float* lo, float* hi) const override {
    *lo = act_min_, *hi = act_max_;
    return true;
  }
  void SetClamp(float lo, float hi) override { act_min_ = lo, act_max_ = hi; }

  int Rows(const Shape& in) const {
    const int64_t total = NumElements(in);
    if (k_ <= 0 || total % k_ != 0)
      throw Error("FULLY_CONNECTED input " + ShapeString(in) +
                  " is not a multiple of K=" + std::to_string(k_));
    return static_cast<int>(total / k_);
  }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    const int m = Rows(in[0]);
    if (keep_num_dims_) {
      if (in[0].empty() || in[0].back() != k_)
        throw Error("FULLY_CONNECTED keep_num_dims needs the last input dim == K");
      Shape out = in[0];
      out.back() = n_;
      return {out};
    }
    return {{m, n_}};
  }

  double WeightBytes() const override {
    if (!chunk_) return double(src_->Bytes());
    return buffers_ ? double(buffers_->first.bytes() + buffers_->second.bytes()) : 0.0;
  }

  double Flops(const std::vector<Shape>& in, const std::vector<Shape>&) const override {
    return 2.0 * Rows(in[0]) * n_ * k_;
  }

  std::vector<size_t> ScratchBytes(const OpContext& ctx,
                                   const std::vector<Shape>& in) const override {
    const int m = Rows(in[0]);
    if (m <= kSmallM) return {};
    const size_t bytes =
        GemmScratchBytes(PlanGemm(ctx.env.device(), m, n_, k_, ctx.options.gemm_splits), m, n_);
    return bytes ? std::vector<size_t>{bytes} : std::vector<size_t>{};
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes, const std::vector<Shape>&,
               const std::vector<cl_mem>& in, const std::vector<cl_mem>& out) override {
    const int m = Rows(in_shapes[0]);
    buffers_ = &src_->Get(ctx, n0_, n_);
    cl_mem w = buffers_->first.get(), bias = buffers_->second.get();
    Launch l;
    if (m <= kSmallM) {
      // Batch-1 FC is memory-bound: stream the weights once.
      auto prog = ctx.GetProgram("gemm", "-DSM_MAX_M=" + std::to_string(kSmallM));
      l.name = "gemm_nt_small_m";
      l.global[0] = RoundUp(static_cast<size_t>(n_), kSmallN) / kSmallN * kSmallWg;
      l.local[0] = kSmallWg;
      l.kernel = CreateKernel(*prog, l.name);
      algorithm_ = "gemv";
    } else {
      launches_ = EncodeGemm(ctx, PlanGemm(ctx.env.device(), m, n_, k_, ctx.options.gemm_splits),
                             in[0], w, bias, out[0], m, n_, k_, act_min_, act_max_);
      algorithm_ = launches_.size() > 1 ? "gemm_splitk" : "gemm";
      return;
    }
    SetArgs(l.kernel, in[0], w, bias, out[0], m, n_, k_, act_min_, act_max_);
    l.dims = 1;
    launches_.clear();
    launches_.push_back(std::move(l));
  }

  // Chunks see the input as [M, K] and the output as [M, N]: rows of M, ranges of N.
  bool GetChunkSpec(const std::vector<Shape>& in, ChunkSpec* spec) const override {
    const int m = Rows(in[0]);
    spec->views = {{m, k_}, {m, n_}};
    spec->weight_axes = {1};
    spec->axes = {0, 1};
    return true;
  }
  std::vector<Box> ChunkInputs(const std::vector<Shape>&, const Box& out) const override {
    return {Box{{out.begin[0], 0}, {out.size[0], k_}}};
  }
  size_t ChunkWeightBytes(const OpContext& ctx, const std::vector<Shape>&,
                          const Box& out) const override {
    return size_t(out.size[1]) * k_ * ctx.storage_bytes;
  }
  std::unique_ptr<Op> MakeChunk(const std::vector<Shape>&, const Box& out) const override {
    return std::make_unique<FullyConnectedOp>(*this, n0_ + out.begin[1], out.size[1]);
  }

 private:
  // gemm.cl's gemm_nt_small_m defaults (SM_WG, SM_N) and the batch it is used for.
  static constexpr int kSmallM = 8;
  static constexpr size_t kSmallN = 8, kSmallWg = 128;
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
    return "fused activation " + std::to_string(p.activation) + " is not supported";
  if (p.weights_format != 0) return "shuffled weights format";
  std::vector<int> tensors = {node.inputs[0], node.inputs[1], node.outputs[0]};
  const bool has_bias = node.inputs.size() > 2 && node.inputs[2] >= 0;
  if (has_bias) tensors.push_back(node.inputs[2]);
  if (auto why = CheckFloatTensors(g, tensors); !why.empty()) return why;
  if (!g.IsConstant(node.inputs[1])) return "weights are not constant";
  if (has_bias && !g.IsConstant(node.inputs[2])) return "bias is not constant";
  const Shape w = g.shape(node.inputs[1]);
  if (w.size() != 2 || w[1] <= 0) return "weights must be 2-D [N, K] with K > 0";
  if (NumElements(g.shape(node.inputs[0])) % w[1] != 0) return "input size is not a multiple of K";
  if (has_bias && NumElements(g.shape(node.inputs[2])) != w[0]) return "bias size != N";
  return "";
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
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

}  // namespace

extern const OpHandler kFullyConnectedHandler = {
    tfl::kFullyConnected, "FULLY_CONNECTED", Check, Create, Describe, Work, false, true};

}  // namespace clgpu
