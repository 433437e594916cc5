// CONV_2D on int8 tensors (per-tensor or per-channel int8 weights, int32 bias): int32
// accumulation and TFLite's requantization, bit for bit. Algorithms whose integer result is
// exact: the implicit GEMM (any geometry), the plain GEMM for 1x1 (both gemm_int8.cl, the
// device's dot-product instruction) and the direct kernel (conv2d_int8.cl, forced for tests);
// never Winograd, whose transforms leave the integers. TFLite runs int8 convolutions through
// ruy, whose multiplier rounds every tie up (ops/quant.h). A node whose tensors or weights
// exceed the largest allocation runs in chunks (boxes of the output, output channels first).
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include "common/error.h"
#include "ops/conv_geometry.h"
#include "ops/conv_op.h"
#include "ops/gemm_int8.h"
#include "ops/int8_ops.h"
#include "ops/quant.h"
#include "ops/squeeze.h"
#include "tflite/builtin.h"

namespace clgpu {

namespace {

enum class Algo { kDirect, kImplicitGemm, kGemm1x1 };

// The filter, bias and output stage on the host and their device copies per range of output
// channels [oc0, oc0 + count), shared by the op and its chunks (each range uploaded once).
struct Int8ConvSource {
  Shape filter_shape;  // OHWI: a range of O is contiguous
  std::vector<int8_t> filter;
  std::vector<int32_t> bias;
  OutputStage stage;
  int in_zero = 0;
  std::map<std::pair<int, int>, Int8GemmWeights> gemm;
  struct Direct {
    Buffer filter, bias, stage;
  };
  std::map<std::pair<int, int>, Direct> direct;

  size_t PerChannel() const { return size_t(filter_shape[1]) * filter_shape[2] * filter_shape[3]; }
  // The stage of channels [oc0, oc0 + count): their multipliers, the rounding split moved.
  OutputStage StageOf(int oc0, int count) const {
    OutputStage s = stage;
    s.params.assign(stage.params.begin() + 2 * oc0, stage.params.begin() + 2 * (oc0 + count));
    s.up_below = std::clamp(stage.up_below - oc0, 0, count);
    return s;
  }
  const Int8GemmWeights& Gemm(OpContext& ctx, int oc0, int count) {
    auto it = gemm.find({oc0, count});
    if (it != gemm.end()) return it->second;
    const size_t per = PerChannel();
    const std::vector<int8_t> f(filter.begin() + oc0 * per, filter.begin() + (oc0 + count) * per);
    const std::vector<int32_t> b(bias.begin() + oc0, bias.begin() + oc0 + count);
    return gemm
        .emplace(std::make_pair(oc0, count),
                 PrepareInt8Gemm(ctx, f, count, int(per), b, in_zero, StageOf(oc0, count)))
        .first->second;
  }
  const Direct& DirectOf(OpContext& ctx, int oc0, int count) {
    Direct& d = direct[{oc0, count}];
    if (!d.filter) {
      const size_t per = PerChannel();
      d.filter = UploadBytes(ctx, filter.data() + oc0 * per, count * per);
      d.bias = UploadBytes(ctx, bias.data() + oc0, size_t(count) * 4);
      d.stage = UploadOutputStage(ctx, stage, oc0, count);
    }
    return d;
  }
  size_t Bytes() const {
    size_t n = 0;
    for (const auto& [k, w] : gemm) n += w.b.bytes() + w.bias.bytes() + w.stage.bytes();
    for (const auto& [k, d] : direct) n += d.filter.bytes() + d.bias.bytes() + d.stage.bytes();
    return n;
  }
};

// The part of a table (AttachTable) that a chunk of `oc` output channels from `from` on applies:
// the whole table, or where it is one per channel, those channels' (its kernels index their
// channels from 0).
std::vector<uint8_t> ChunkTable(const std::vector<uint8_t>& t, int from, int oc) {
  if (t.size() <= 256) return t;
  const size_t begin = size_t(from) * 256, end = begin + size_t(oc) * 256;
  if (from < 0 || end > t.size()) throw Error("CONV_2D chunk: its channels' tables out of range");
  return std::vector<uint8_t>(t.begin() + long(begin), t.begin() + long(end));
}

class Conv2dInt8Op : public ConvOpBase {
 public:
  Conv2dInt8Op(const GraphView& g, const NodeInfo& node, const tfl::ConvParams& p)
      : ConvOpBase(g, node, p, /*grouped=*/false), src_(std::make_shared<Int8ConvSource>()) {
    src_->filter_shape = filter_shape_;
    src_->filter = ConstantInt8(g, node.inputs[1]);
    const int oc = src_->filter_shape[0];
    if (node.inputs.size() > 2 && node.inputs[2] >= 0) {
      src_->bias = ConstantInt32(g, node.inputs[2]);
    } else {
      src_->bias.assign(oc, 0);
    }
    const QuantParams in = g.quant(node.inputs[0]), out = g.quant(node.outputs[0]);
    src_->in_zero = in.zero_point[0];
    int lo = -128, hi = 127;
    QuantizedActivationRange(p.activation, out, ValueType::kInt8, &lo, &hi);
    src_->stage = MakeOutputStage(in.scale[0], g.quant(node.inputs[1]).scale, oc, out,
                                  RuyRounding(oc), lo, hi);
  }
  // A chunk: this geometry exactly, output channels from oc0 on.
  Conv2dInt8Op(const Conv2dInt8Op& whole, const ConvGeometry& g, int oc0)
      : ConvOpBase(whole, g, oc0),
        src_(whole.src_),
        chunk_table_(ChunkTable(whole.chunk_ ? whole.chunk_table_ : whole.epilogue_table(),
                                oc0 - whole.oc0_, g.oc)) {
    KeepChunkFolds(whole, &chunk_folds_);
  }

  bool TakesTable() const override { return true; }
  std::string algorithm() const override {
    const std::string split = split_ ? "_splitk/" : "/";
    return (algo_ == Algo::kDirect         ? "int8_direct"
            : block_                       ? "int8_inverted_residual/" + dot_
            : algo_ == Algo::kImplicitGemm ? "int8_implicit_gemm" + split + dot_
                                           : "int8_gemm" + split + dot_) +
           (folded_expand() ? "+EXPAND" : "") + (folded_depthwise() ? "+DEPTHWISE" : "") +
           (has_residual() ? "+ADD" : "") + (has_pool() ? "+POOL" : "") +
           (has_gate() ? "+GATE" : "") + (tail_squeeze() ? "+SQUEEZE" : "");
  }
  // The implicit GEMM writes each 2x2 window's largest byte (kernels/gemm_int8.cl's POOL2),
  // whatever it would run alone (a 1x1 layer's plain GEMM reads no pixels).
  bool TakesPool(const OpContext& ctx, const std::vector<Shape>& in) const override {
    return !chunk_ && in.size() == 1 && in[0].size() == 4 && !has_residual() && !has_gate() &&
           !folded_depthwise() && Choose(ctx, Geometry(in[0])) != Algo::kDirect &&
           Int8GemmTakesPool(ctx.env.device());
  }
  // The 1x1 GEMM computes a depthwise convolution's output as its A (ops/gemm_int8.h).
  // One image through a GEMM (not the direct kernel, not the block kernel of a folded expand).
  bool TakesSqueezeTail(const OpContext& ctx, const std::vector<Shape>& in) const override {
    return !chunk_ && in.size() == 1 && in[0].size() == 4 && in[0][0] == 1 && !has_residual() &&
           !has_pool() && !folded_expand() &&
           (folded_depthwise() || Choose(ctx, Geometry(in[0])) != Algo::kDirect) &&
           Int8GemmTakesSqueezeTail(ctx.env.device());
  }
  bool TakesDepthwise(const OpContext& ctx, const std::vector<Shape>& in) const override {
    return !chunk_ && !has_gate() && !in.empty() && in[0].size() == 4 && in[0][3] % 4 == 0 &&
           Choose(ctx, Geometry(in[0])) == Algo::kGemm1x1;
  }
  // The plain GEMM gates A's bytes where it loads them (kernels/gemm_int8_gate.cl): a 1x1
  // layer of one image (one gate) that it runs, not one computing its A from a folded op.
  bool TakesGate(const OpContext& ctx, const std::vector<Shape>& in) const override {
    return !chunk_ && !in.empty() && in[0].size() == 4 && in[0][0] == 1 && !has_gate() &&
           !has_pool() && !folded_depthwise() && !folded_expand() &&
           Choose(ctx, Geometry(in[0])) == Algo::kGemm1x1;
  }
  // The GEMM algorithms apply a folded ADD's arithmetic to their output integers (the direct
  // kernel, forced for tests, does not). Any own activation is fine: its clamp comes first.
  bool CanFuseResidual(const OpContext& ctx, const std::vector<Shape>& in) const override {
    return !chunk_ && in.size() == 1 && in[0].size() == 4 &&
           Choose(ctx, Geometry(in[0])) != Algo::kDirect;
  }

  // A 1x1 filter over one image's single pixel of these K channels (any stride or padding gives
  // one output pixel): a dense op over the channels.
  bool GetInt8Dense(OpContext& ctx, const Shape& in, Int8Dense* dense) override {
    const Shape& f = src_->filter_shape;
    // A table per channel: the squeeze's kernel maps through one (kernels/squeeze_int8.cl).
    if (chunk_ || has_residual() || has_gate() || f[1] != 1 || f[2] != 1 ||
        NumElements(in) != f[3] || in.empty() || in.back() != f[3] || epilogue_table().size() > 256)
      return false;
    dense->w = &src_->Gemm(ctx, 0, f[0]);
    dense->stage = src_->stage;
    dense->stage.table = epilogue_table();
    return true;
  }

  // The whole op counts every weight buffer of its source (its chunks' included).
  double WeightBytes() const override { return chunk_ ? 0.0 : double(src_->Bytes()); }

  // Its largest buffer: the packed filter, or split-K's int32 sums.
  size_t ChunkWeightBytes(const OpContext& ctx, const std::vector<Shape>& in,
                          const Box& out) const override {
    Box box;
    const ConvGeometry g = Geometry(in[0]).Chunk(out, &box);
    const int k = int(src_->PerChannel());
    const size_t sums =
        Choose(ctx, g) == Algo::kDirect ? 0 : Int8GemmSumBytes(ctx, g.n * g.oh * g.ow, g.oc, k);
    return std::max(size_t(g.oc) * ((k + 3) / 4 * 4), sums);
  }
  std::unique_ptr<Op> MakeChunk(const std::vector<Shape>& in, const Box& out) const override {
    Box box;
    return std::make_unique<Conv2dInt8Op>(*this, Geometry(in[0]).Chunk(out, &box),
                                          oc0_ + out.begin[3]);
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes,
               const std::vector<Shape>& out_shapes, const std::vector<cl_mem>& in,
               const std::vector<cl_mem>& out) override {
    const ConvGeometry g = Geometry(in_shapes[0]);
    algo_ = has_pool() ? Algo::kImplicitGemm : Choose(ctx, g);
    if (has_gate() && (algo_ != Algo::kGemm1x1 || gate_quant().size() != 7))
      throw Error("CONV_2D: its folded gate needs the plain GEMM");
    launches_.clear();
    split_ = block_ = false;
    OutputStage stage = src_->StageOf(oc0_, g.oc);
    // A chunk applies its whole op's table (the chunk's program is built with its define).
    stage.table = chunk_ ? chunk_table_ : epilogue_table();
    if (algo_ == Algo::kDirect) {
      const Int8ConvSource::Direct& d = src_->DirectOf(ctx, oc0_, g.oc);
      cl_mem stage_buf = d.stage.get();
      if (!stage.table.empty()) {
        state_.table_stage = UploadOutputStage(ctx, stage);
        stage_buf = state_.table_stage.get();
      }
      Launch l;
      l.name = "conv2d_int8_direct";
      l.kernel = CreateKernel(*ctx.GetProgram("conv2d_int8"), l.name);
      SetArgs(l.kernel, in[0], d.filter.get(), d.bias.get(), stage_buf, out[0], g.n, g.h, g.w, g.c,
              g.oh, g.ow, g.oc, g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.pad_top, g.pad_left,
              src_->in_zero, stage.up_below, stage.zero_point, stage.act_min, stage.act_max);
      l.dims = 3;
      l.global[0] = g.oc, l.global[1] = g.ow, l.global[2] = size_t(g.n) * g.oh;
      launches_.push_back(std::move(l));
      return;
    }
    // One packed filter serves both GEMM algorithms: OHWI is already [OC][KH * KW * C].
    const Int8GemmWeights& w = src_->Gemm(ctx, oc0_, g.oc);
    Int8Gate gate;
    if (has_gate()) {
      const std::vector<int>& q = gate_quant();
      gate = Int8Gate{in.at(gate_input()), q[0], q[1], q[2], q[3], q[4], q[5], q[6]};
    }
    Int8Pool pool;
    if (has_pool()) {
      const Shape& p = out_shapes.at(0);
      pool = Int8Pool{p.size() == 4 ? int(p[1]) : 0, p.size() == 4 ? int(p[2]) : 0};
      if (p.size() != 4 || p[0] != g.n || p[3] != g.oc || pool.ph != g.oh / 2 ||
          pool.pw != g.ow / 2)
        throw Error("CONV_2D: the folded pool no longer fits its output");
    }
    const int m = has_pool() ? 4 * g.n * pool.ph * pool.pw : g.n * g.oh * g.ow;
    Int8Residual residual;
    if (has_residual()) residual = Int8Residual{in.at(1), Op::residual().quant};
    Int8DepthwiseA dw;
    if (folded_depthwise() &&
        (algo_ != Algo::kGemm1x1 || !folded_depthwise()->fold_source()->GetInt8Depthwise(
                                        ctx, DepthwiseInput(in_shapes[0]), &dw)))
      throw Error("CONV_2D: the folded depthwise no longer fits its GEMM");
    Int8Dense ex;
    if (folded_expand()) {
      const int ec = in_shapes[0].back();
      if (!folded_expand()->fold_source()->GetInt8Dense(ctx, {1, 1, 1, ec}, &ex) ||
          !ex.stage.table.empty())
        throw Error("CONV_2D: the folded expand no longer fits its GEMM");
      dw.expand = ex.w;
      dw.expand_up_below = ex.stage.up_below, dw.expand_zero = ex.stage.zero_point;
      dw.expand_min = ex.stage.act_min, dw.expand_max = ex.stage.act_max;
    }
    // A folded expand: the block kernel where it runs the block, else the GEMM's EXPAND_A.
    if (dw.expand)
      launches_ = EncodeInt8Block(ctx, w, in[0], out[0], src_->in_zero, stage, &state_,
                                  has_residual() ? &residual : nullptr, dw, &dot_);
    block_ = !launches_.empty();
    Int8TailSqueeze tail;
    if (tail_squeeze() &&
        (block_ || m != NumElements(tail_squeeze_shape()) / std::max<int64_t>(g.oc, 1) ||
         !GetFoldedInt8TailSqueeze(ctx, *tail_squeeze(), tail_squeeze_shape(), &tail)))
      throw Error("CONV_2D: the folded squeeze no longer fits its GEMM");
    if (!block_)
      launches_ = EncodeInt8Gemm(ctx, w, in[0], out[0], m, src_->in_zero, stage, &state_,
                                 algo_ == Algo::kImplicitGemm ? &g : nullptr, &dot_,
                                 has_residual() ? &residual : nullptr,
                                 folded_depthwise() ? &dw : nullptr, has_pool() ? &pool : nullptr,
                                 tail_squeeze() ? &tail : nullptr, has_gate() ? &gate : nullptr);
    split_ = !block_ &&
             Int8GemmSplits(ctx, m, g.oc, int(src_->PerChannel()), folded_depthwise() != nullptr);
  }

 private:
  // The forced algorithm (option conv_algorithm) where it applies, else the 1x1 GEMM for
  // pointwise layers and the implicit GEMM for the rest.
  static Algo Choose(const OpContext& ctx, const ConvGeometry& g) {
    const std::string& f = ctx.options.conv_algorithm;
    const bool pointwise = g.Pointwise();
    if (f == "direct") return Algo::kDirect;
    if (f == "implicit_gemm") return Algo::kImplicitGemm;
    return pointwise ? Algo::kGemm1x1 : Algo::kImplicitGemm;
  }

  std::shared_ptr<Int8ConvSource> src_;
  std::vector<uint8_t> chunk_table_;  // a chunk's copy of its whole op's folded table
  Attachments chunk_folds_;           // a chunk's: its whole op's residual
  Int8GemmState state_;               // the buffers its launches use beyond the weights
  Algo algo_ = Algo::kImplicitGemm;
  std::string dot_;
  bool split_ = false;
  bool block_ = false;  // the folded expand, depthwise and this conv in one block kernel
};

}  // namespace

std::string CheckConv2dInt8(const GraphView& g, const NodeInfo& node) {
  const Shape f = g.shape(node.inputs[1]);
  if (f.size() != 4) return "filter must be 4-D";
  return CheckInt8FilterOp(g, node, 0, f[0]);
}

std::unique_ptr<Op> CreateConv2dInt8(const GraphView& g, const NodeInfo& node) {
  tfl::ConvParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  return std::make_unique<Conv2dInt8Op>(g, node, p);
}

// XNNPACK's int8 convolution on AMX tiles, fitted on the H200 host's 16 and 4 threads
// (bench/results/cpu-int8-conv-*.md, 469 shapes each: 1x1 to 10x8 filters, 1-128 input
// channels): each thread runs tiles of 16 output pixels, each tile costing ns per pixel, per
// pixel x filter tap (for each 128 output channels) and per output element. The thread with the
// most tiles sets the time; one set of figures fits both thread counts. The multiply-adds
// hardly count: 1 to 128 input channels took about the same time, so a filter over few
// channels runs slower than its float form (3x3 from one channel: 4x).
constexpr long kTilePixels = 16;
constexpr double kTilePixelNs = 17.4, kTilePixelTapNs = 6.42, kTileOutputNs = 0.312;
double Conv2dInt8CpuNs(const GraphView& g, const NodeInfo& n, const CpuHost& host) {
  if (!host.int8_tiles || n.inputs.size() < 2 || n.outputs.empty()) return 0;
  for (int t : {n.inputs[1], n.outputs[0]})
    if (!g.valid_tensor(t)) return 0;
  const Shape f = g.shape(n.inputs[1]), out = g.shape(n.outputs[0]);  // [OC, KH, KW, IC], NHWC
  if (f.size() != 4 || out.size() != 4) return 0;
  const long tiles = (long(out[0]) * out[1] * out[2] + kTilePixels - 1) / kTilePixels;
  const long threads = std::max(host.threads, 1);
  const double busiest = double((tiles + threads - 1) / threads * kTilePixels);  // one thread's
  return busiest *
         (double((f[0] + 127) / 128) * (kTilePixelNs + double(f[1] * f[2]) * kTilePixelTapNs) +
          double(out[3]) * kTileOutputNs);
}

}  // namespace clgpu
