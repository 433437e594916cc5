// A short-time Fourier transform's ops: RFFT2D with fft_length [1, n] (each row's n-point real
// transform, bins 0 .. n / 2, as tf.signal.stft converts), and what reads its complex64 bins:
// REAL, IMAG, COMPLEX_ABS and CAST to float32 (the real part, TFLite's cast; ops/cast.cc). XNNPACK
// takes none of them: TFLite's own RFFT2D ran 65 % of BirdNET's CPU invoke on the H200 host,
// and left on the CPU they split an audio model's front end from its network.
#include "ops/spectral.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "ops/op.h"
#include "ops/op_helpers.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

bool PowerOfTwo(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

class Rfft2dOp : public Op {
 public:
  Rfft2dOp(const NodeInfo& node, int n) : Op(node, {node.inputs[0]}, {node.outputs[0]}), n_(n) {}
  const char* type_name() const override { return "RFFT2D"; }
  std::string algorithm() const override { return "direct_rows"; }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    if (in[0].size() < 2) throw Error("RFFT2D input of rank below 2");
    Shape out = in[0];
    out[out.size() - 2] = 1;
    out.back() = n_ / 2 + 1;
    return {out};
  }
  double Flops(const std::vector<Shape>& in, const std::vector<Shape>& out) const override {
    return 4.0 * double(NumElements(out[0])) * std::min<double>(n_, in[0].back());
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes,
               const std::vector<Shape>& out_shapes, const std::vector<cl_mem>& in,
               const std::vector<cl_mem>& out) override {
    if (!twiddles_) {  // (cos, -sin)(2 pi m / n), from doubles
      std::vector<float> tw(2 * static_cast<size_t>(n_));
      for (int m = 0; m < n_; ++m) {
        const double a = 2.0 * M_PI * m / n_;
        tw[2 * m] = static_cast<float>(std::cos(a));
        tw[2 * m + 1] = static_cast<float>(-std::sin(a));
      }
      twiddles_ = UploadFloat32(ctx, tw);
    }
    const Shape& s = in_shapes[0];
    const int len = s.back(), height = s[s.size() - 2];
    const int bins = out_shapes[0].back();
    const int rows = static_cast<int>(NumElements(s) / std::max<int64_t>(int64_t(len) * height, 1));
    Launch l;
    l.name = "rfft_rows";
    l.kernel = CreateKernel(*ctx.GetProgram("spectral"), l.name);
    SetArgs(l.kernel, in[0], twiddles_.get(), out[0], rows, len, len * height, n_, bins);
    l.dims = 2;
    l.local[0] = 64, l.local[1] = 1;
    l.global[0] = RoundUp(std::max(bins, 1), 64);
    l.global[1] = std::max(rows, 1);
    launches_.clear();
    launches_.push_back(std::move(l));
  }

  double WeightBytes() const override { return 8.0 * n_; }

 private:
  int n_;
  Buffer twiddles_;
};

std::string CheckComplexIn(const GraphView& g, int t) {
  if (!g.valid_tensor(t)) return "tensor index " + std::to_string(t) + " is invalid";
  if (g.value_type(t) != ValueType::kComplex64) return "tensor " + g.name(t) + " is not complex64";
  if (!g.tensor(t).dims) return "tensor " + g.name(t) + " has no shape";
  if (g.IsConstant(t)) return "a constant complex64 input";
  return "";
}

int PartOf(int32_t op) {
  return op == tfl::kImag ? kPartImag : op == tfl::kComplexAbs ? kPartAbs : kPartReal;
}
const char* NameOf(int32_t op) {
  return op == tfl::kImag ? "IMAG" : op == tfl::kComplexAbs ? "COMPLEX_ABS" : "REAL";
}

std::string CheckPart(const GraphView& g, const NodeInfo& node) {
  return CheckComplexPart(g, node);
}
std::unique_ptr<Op> CreatePart(const GraphView&, const NodeInfo& node) {
  return CreateComplexPart(node, NameOf(node.op), PartOf(node.op));
}

std::string CheckRfft(const GraphView& g, const NodeInfo& node) {
  if (node.inputs.size() != 2 || node.outputs.size() != 1) return "unexpected input/output count";
  if (auto why = CheckFloatTensors(g, {node.inputs[0]}); !why.empty()) return why;
  const int y = node.outputs[0];
  if (!g.valid_tensor(y) || g.value_type(y) != ValueType::kComplex64 || !g.tensor(y).dims)
    return "output is not complex64";
  std::vector<int64_t> len;
  if (auto why = g.ReadConstantInts(node.inputs[1], "fft_length", &len); !why.empty()) return why;
  if (len.size() != 2) return "fft_length of " + std::to_string(len.size()) + " values";
  // A transform over two axes needs a complex pass along the first: rows alone are ours.
  if (len[0] != 1) return "fft_length [" + std::to_string(len[0]) + ", n]: only [1, n] is claimed";
  // TFLite's kernel takes powers of two only (and n / 2 + 1 bins of an int).
  if (!PowerOfTwo(len[1]) || len[1] > (1 << 20)) return "fft_length n is not a power of two";
  const Shape s = g.shape(node.inputs[0]);
  if (s.size() < 2) return "input of rank below 2";
  if (s.back() == 0 || s[s.size() - 2] == 0) return "an empty input";
  return "";
}

std::unique_ptr<Op> CreateRfft(const GraphView& g, const NodeInfo& node) {
  return std::make_unique<Rfft2dOp>(node, static_cast<int>(g.ConstantInts(node.inputs[1])[1]));
}

double RfftWork(const GraphView& g, const NodeInfo& node) {
  const Shape s = g.shape(node.inputs[0]), o = g.shape(node.outputs[0]);
  return s.empty() ? 0.0 : 4.0 * double(NumElements(o)) * double(s.back());
}

}  // namespace

std::string CheckComplexPart(const GraphView& g, const NodeInfo& node) {
  if (node.inputs.size() != 1 || node.outputs.size() != 1) return "unexpected input/output count";
  if (auto why = CheckComplexIn(g, node.inputs[0]); !why.empty()) return why;
  if (auto why = CheckFloatTensors(g, {node.outputs[0]}); !why.empty()) return why;
  if (g.shape(node.inputs[0]) != g.shape(node.outputs[0]))
    return "output shape differs from the input's";
  return "";
}

std::unique_ptr<Op> CreateComplexPart(const NodeInfo& node, const char* name, int part) {
  return MakeConvertOp(node, name, "complex_part", "spectral", "complex_part", part);
}

// TFLite's own RFFT2D (Ooura's real FFT, twiddle tables made at each call): 12 ns an output bin
// on one thread of a 2-core Xeon for 511 frames of 1024 and of 2048 points, 19-33 on the H200
// host (its share of BirdNET's CPU invoke under py-spy, 2026-11-28). The lower figure.
constexpr double kCpuRfftNsPerBin = 12.0;
extern const OpHandler kRfft2dHandler = [] {
  OpHandler h{tfl::kRfft2d, "RFFT2D", CheckRfft, CreateRfft};
  h.work = RfftWork;
  h.cpu_float_ns_per_element = kCpuRfftNsPerBin;
  return h;
}();
extern const OpHandler kRealHandler = {tfl::kReal, "REAL", CheckPart, CreatePart};
extern const OpHandler kImagHandler = {tfl::kImag, "IMAG", CheckPart, CreatePart};
extern const OpHandler kComplexAbsHandler = {tfl::kComplexAbs, "COMPLEX_ABS", CheckPart,
                                             CreatePart};

}  // namespace clgpu
