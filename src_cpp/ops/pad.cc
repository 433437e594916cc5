// PAD, PADV2 and MIRROR_PAD (REFLECT, SYMMETRIC) of float tensors up to rank 6: one work-item per
// output element reads its source element or writes the pad value. One program for the three:
// the mode is a kernel argument.
#include "ops/pad.h"

#include <cstring>

#include "common/error.h"
#include "ops/op.h"
#include "ops/quant.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr int kMaxRank = 6;
constexpr int kConstant = kPadConstant, kReflect = kPadReflect, kSymmetric = kPadSymmetric;

// TfLiteMirrorPaddingParams: its mode, 1 REFLECT, 2 SYMMETRIC (0 unknown).
struct MirrorPadParams {
  int mode;
};

const char* NameOf(int32_t op) {
  return op == tfl::kPad ? "PAD" : op == tfl::kPadV2 ? "PADV2" : "MIRROR_PAD";
}

class PadOp : public Op {
 public:
  PadOp(const NodeInfo& node, PadSpec spec)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}), op_(node.op), spec_(std::move(spec)) {}
  const char* type_name() const override { return NameOf(op_); }
  std::string algorithm() const override { return chained() ? "gather_chain" : "gather"; }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    const Shape& s = in.at(0);
    if (s.size() != spec_.before.size())
      throw Error(std::string(NameOf(op_)) + " input " + ShapeString(s) + " has rank " +
                  std::to_string(s.size()) + ", its paddings " +
                  std::to_string(spec_.before.size()));
    Shape out(s.size());
    for (size_t a = 0; a < s.size(); ++a) {
      const int lim = spec_.mode == kReflect ? s[a] - 1 : s[a];
      if (spec_.mode != kConstant && (spec_.before[a] > lim || spec_.after[a] > lim))
        throw Error("MIRROR_PAD paddings exceed axis " + std::to_string(a) + " of " +
                    ShapeString(s));
      out[a] = s[a] + spec_.before[a] + spec_.after[a];
    }
    return {out};
  }
  double Flops(const std::vector<Shape>&, const std::vector<Shape>& out) const override {
    return static_cast<double>(NumElements(out[0]));
  }
  bool IndexStageOf(const Shape& in, const Shape& out, IndexStage* stage) const override {
    if (in.size() != spec_.before.size() || out.size() != in.size()) return false;
    *stage = PadStage(in, out, spec_.before, spec_.mode, spec_.value);
    return true;
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes,
               const std::vector<Shape>& out_shapes, const std::vector<cl_mem>& in,
               const std::vector<cl_mem>& out) override {
    if (PrepareChain(ctx, out_shapes[0], in, out)) return;
    const Shape &s = in_shapes[0], &o = out_shapes[0];
    std::vector<int> meta(o.begin(), o.end());
    meta.insert(meta.end(), s.begin(), s.end());
    meta.insert(meta.end(), spec_.before.begin(), spec_.before.end());
    meta_ = UploadInts(ctx, meta);
    const int total = static_cast<int>(NumElements(o)), rank = static_cast<int>(o.size());
    Launch l;
    l.name = "pad";
    l.kernel = CreateKernel(*ctx.GetProgram("pad"), l.name);
    SetArgs(l.kernel, in[0], out[0], total, rank, meta_.get(), spec_.mode, spec_.value);
    l.global[0] = static_cast<size_t>(total);
    launches_.clear();
    launches_.push_back(std::move(l));
  }

 private:
  int32_t op_;
  PadSpec spec_;
  Buffer meta_;
};

}  // namespace

std::string ReadPadSpec(const GraphView& g, const NodeInfo& node, PadSpec* spec) {
  const char* name = NameOf(node.op);
  const size_t want = node.op == tfl::kPadV2 ? 3 : 2;
  if (node.inputs.size() < 2 || node.inputs.size() > want || node.outputs.size() != 1)
    return "unexpected input/output count";
  // Quantized tensors are copied as their integers (OpContext::ForValues); the constant padding
  // is the output's zero point, as TFLite pads them, or PADV2's own quantized value.
  const ValueType t =
      g.valid_tensor(node.inputs[0]) ? g.value_type(node.inputs[0]) : ValueType::kFloat;
  if (IsQuantized(t)) {
    for (int x : {node.inputs[0], node.outputs[0]})
      if (auto why = CheckQuantActivation(g, x, t); !why.empty()) return why;
    // Copied integers keep their meaning only in the same quantization. TFLite's MIRROR_PAD
    // refuses others at prepare (a bit-flipped scale ran as a copy here, found by the fuzzer);
    // such a pad stays with TFLite, which does with it what it does without the delegate.
    const QuantParams qi = g.quant(node.inputs[0]), qo = g.quant(node.outputs[0]);
    if (qi.scale != qo.scale || qi.zero_point != qo.zero_point)
      return std::string("quantized ") + name + " whose input and output quantizations differ";
    spec->value = static_cast<float>(g.quant(node.outputs[0]).zero_point[0]);
  } else if (auto why = CheckFloatTensors(g, {node.inputs[0], node.outputs[0]}); !why.empty()) {
    return why;
  }
  const Shape in = g.shape(node.inputs[0]);
  const int rank = static_cast<int>(in.size());
  if (rank > kMaxRank) return "rank above " + std::to_string(kMaxRank);
  std::vector<int64_t> p;
  if (auto why = g.ReadConstantInts(node.inputs[1], std::string(name) + " paddings", &p);
      !why.empty())
    return why;
  if (g.shape(node.inputs[1]) != Shape{rank, 2} && !(rank == 0 && p.empty()))
    return std::string(name) + " paddings must have shape [" + std::to_string(rank) + ", 2]";
  for (int64_t v : p)
    if (v < 0 || v > (1 << 24)) return std::string(name) + " paddings must be in [0, 2^24]";
  for (int a = 0; a < rank; ++a) {
    spec->before.push_back(static_cast<int>(p[2 * a]));
    spec->after.push_back(static_cast<int>(p[2 * a + 1]));
  }
  if (node.op == tfl::kPadV2 && node.inputs.size() == 3 && node.inputs[2] >= 0) {
    const int c = node.inputs[2];
    const ValueType ct = g.valid_tensor(c) ? g.value_type(c) : ValueType::kUnsupported;
    if (ct != (IsQuantized(t) ? t : ValueType::kFloat) || !g.IsConstant(c) ||
        NumElements(g.shape(c)) != 1)
      return "PADV2 constant_values must be a constant scalar of the input's type";
    if (IsQuantized(t)) {
      const std::vector<uint8_t> b = g.ConstantBytes(c);
      spec->value = t == ValueType::kInt8 ? float(static_cast<int8_t>(b[0])) : float(b[0]);
    } else {
      spec->value = g.ConstantFloats(c)[0];
    }
  }
  if (node.op == tfl::kMirrorPad) {
    if (!node.builtin_data) return "missing MIRROR_PAD params";
    MirrorPadParams mp;
    std::memcpy(&mp, node.builtin_data, sizeof mp);
    if (mp.mode != kReflect && mp.mode != kSymmetric)
      return "MIRROR_PAD mode " + std::to_string(mp.mode) + " is not REFLECT or SYMMETRIC";
    spec->mode = mp.mode;
    for (int a = 0; a < rank; ++a) {
      const int lim = spec->mode == kReflect ? in[a] - 1 : in[a];
      if (spec->before[a] > lim || spec->after[a] > lim)
        return "MIRROR_PAD paddings exceed axis " + std::to_string(a) + " of " + ShapeString(in);
    }
  }
  return "";
}

namespace {

std::string Check(const GraphView& g, const NodeInfo& node) {
  PadSpec spec;
  return ReadPadSpec(g, node, &spec);
}

std::unique_ptr<Op> Create(const GraphView& g, const NodeInfo& node) {
  PadSpec spec;
  if (auto why = ReadPadSpec(g, node, &spec); !why.empty()) throw Error(why);
  return std::make_unique<PadOp>(node, std::move(spec));
}

}  // namespace

namespace {
// XNNPACK pads the last axis a row at a time: about 3 ns an output row (pixel) at 16 threads,
// float or int8, at 4-64 channels, far over its bytes (128 x 128 x 8 channels: 46 us, a roofline
// of 4; bench/results/cpu-channel-ops-h200-host-*.md). MediaPipe's blocks pad their shortcut's
// channels so; counted whatever the interpreter's threads.
constexpr double kCpuPadNsPerRow = 3.0;
double CpuPadRowsNs(const GraphView& g, const NodeInfo& node, const CpuHost&) {
  PadSpec spec;
  if (!ReadPadSpec(g, node, &spec).empty() || spec.before.empty() ||
      (spec.before.back() == 0 && spec.after.back() == 0))
    return 0;
  const Shape out = g.shape(node.outputs[0]);
  return out.empty() || out.back() <= 0 ? 0
                                        : double(NumElements(out) / out.back()) * kCpuPadNsPerRow;
}
OpHandler PadHandler(int32_t op, const char* name) {
  OpHandler h{op, name, Check, Create};
  h.cpu_int8_kernel_ns = CpuPadRowsNs;
  h.cpu_float_kernel_ns = CpuPadRowsNs;
  return h;
}
}  // namespace
extern const OpHandler kPadHandler = PadHandler(tfl::kPad, "PAD");
extern const OpHandler kPadV2Handler = PadHandler(tfl::kPadV2, "PADV2");
// XNNPACK takes no MIRROR_PAD: TFLite's own kernel runs it between XNNPACK's subgraphs, 16 ns per
// element on one thread of the H200's host, 2-8 on 2-16 (bench/results/cpu-float-ops-h200-host-*),
// and models of NCHW converter chains around it ran 2.6-4x their CPU estimate without it, up to
// 12x on a host whose threads contended (never-slower-heldout-*). Counted at 8 whatever the
// interpreter's threads. The int8 one is the same kernel at the same pace (bench/cpu_int8_ops.py,
// cpu-int8-ops-*): costed as the roofline alone, litert-torch's int8 audio CNN came out 0.12 ms on
// the CPU against 0.62 measured, and was declined where the GPU ran it in 0.12.
constexpr double kCpuMirrorPadNs = 8.0;
extern const OpHandler kMirrorPadHandler = [] {
  OpHandler h{tfl::kMirrorPad, "MIRROR_PAD", Check, Create};
  h.cpu_float_ns_per_element = kCpuMirrorPadNs;
  h.cpu_int8_ns_per_element = kCpuMirrorPadNs;
  return h;
}();

}  // namespace clgpu
