// FULLY_CONNECTED: any leading dims (flattened to rows), keep_num_dims both ways.
#include <cstring>

#include "common/error.h"
#include "delegate/options.h"
#include "ops/gemm.h"
#include "ops/op.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

class FullyConnectedOp : public Op {
 public:
  FullyConnectedOp(const GraphView& g, const NodeInfo& node, const tfl::FullyConnectedParams& p)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}), keep_num_dims_(p.keep_num_dims) {
    const Shape w = g.shape(node.inputs[1]);
    n_ = w[0], k_ = w[1];
    weights_ = g.ConstantFloats(node.inputs[1]);
    if (node.inputs.size() > 2 && node.inputs[2] >= 0) {
      bias_ = g.ConstantFloats(node.inputs[2]);
    } else {
      bias_.assign(n_, 0.f);
    }
    ActivationRange(p.activation, &act_min_, &act_max_);
  }

  const char* type_name() const override { return "FULLY_CONNECTED"; }
  std::string algorithm() const override { return algorithm_; }

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

  double WeightBytes() const override { return double(weights_buf_.bytes() + bias_buf_.bytes()); }

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
    if (!weights_buf_) {
      weights_buf_ = UploadWeights(ctx, weights_);
      bias_buf_ = UploadFloat32(ctx, bias_);
    }
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
      launches_ =
          EncodeGemm(ctx, PlanGemm(ctx.env.device(), m, n_, k_, ctx.options.gemm_splits), in[0],
                     weights_buf_.get(), bias_buf_.get(), out[0], m, n_, k_, act_min_, act_max_);
      algorithm_ = launches_.size() > 1 ? "gemm_splitk" : "gemm";
      return;
    }
    SetArgs(l.kernel, in[0], weights_buf_.get(), bias_buf_.get(), out[0], m, n_, k_, act_min_,
            act_max_);
    l.dims = 1;
    launches_.clear();
    launches_.push_back(std::move(l));
  }

 private:
  // gemm.cl's gemm_nt_small_m defaults (SM_WG, SM_N) and the batch it is used for.
  static constexpr int kSmallM = 8;
  static constexpr size_t kSmallN = 8, kSmallWg = 128;
  std::string algorithm_ = "gemm";
  bool keep_num_dims_;
  int n_ = 0, k_ = 0;
  std::vector<float> weights_, bias_;
  float act_min_ = 0, act_max_ = 0;
  Buffer weights_buf_, bias_buf_;
};

std::string Check(const GraphView& g, const NodeInfo& node) {
  if (!node.builtin_data) return "missing FULLY_CONNECTED params";
  if (node.inputs.size() < 2 || node.outputs.size() != 1) return "unexpected input/output count";
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

}  // namespace

extern const OpHandler kFullyConnectedHandler = {tfl::kFullyConnected, "FULLY_CONNECTED", Check,
                                                 Create};

}  // namespace clgpu
