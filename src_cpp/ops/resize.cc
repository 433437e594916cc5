// RESIZE_NEAREST_NEIGHBOR and RESIZE_BILINEAR to a constant size, with align_corners and
// half_pixel_centers as TFLite's CPU kernels compute them. The source rows/columns (and
// bilinear fractions) are computed here in float, the CPU's arithmetic, and uploaded as
// small tables: the kernels only gather.
// On int8 / uint8 tensors (the integers moved as they are; TFLite ignores the quantization too)
// the CPU's 8-bit kernels index differently: nearest without align_corners / half_pixel_centers
// finds its sources in 16.16 fixed point; int8 bilinear is reference_ops::ResizeBilinearInteger,
// all integer (weights in 1/1024, the sum rounded half away from zero). uint8 bilinear, a float
// kernel of its own, is not supported.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "ops/op.h"
#include "ops/quant.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr size_t kGroup = 64;  // work-items per group, along an output row

// Source position of output index `o` along one axis, as the CPU kernels find it.
struct Axis {
  int in = 1, out = 1;
  bool align = false, half = false;
  bool integer = false;  // the CPU's 8-bit kernels' arithmetic

  float Scale() const {
    return align && out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1)
                            : static_cast<float>(in) / static_cast<float>(out);
  }
  int Nearest(int o) const {
    if (integer && !align && !half) {
      const int64_t scale = (int64_t(in) << 16) / out + 1;
      return static_cast<int>(std::min<int64_t>((o * scale) >> 16, in - 1));
    }
    const float v = (static_cast<float>(o) + (half ? 0.5f : 0.f)) * Scale();
    const int i = std::min(static_cast<int>(align ? std::round(v) : std::floor(v)), in - 1);
    return std::max(i, 0);  // below 0 only under half_pixel_centers, where the CPU clamps too
  }
  // The two neighbours and the weight of the second (input - first, unclamped as on the CPU);
  // with `integer` in 1/1024 (ResizeBilinearInteger).
  void Linear(int o, int* i0, int* i1, float* frac) const {
    if (integer) {
      int scale = ((1 << 10) * in + out / 2) / out;
      if (align && out > 1) scale = ((1 << 10) * (in - 1) + (out - 1) / 2) / (out - 1);
      const int v = half ? o * scale + scale / 2 - (1 << 9) : o * scale;
      *i0 = std::max(v / (1 << 10), 0);
      *i1 = std::min((v + (1 << 10) - 1) / (1 << 10), in - 1);
      *frac = static_cast<float>(v - (1 << 10) * *i0);
      return;
    }
    const float v =
        half ? (static_cast<float>(o) + 0.5f) * Scale() - 0.5f : static_cast<float>(o) * Scale();
    *i0 = std::clamp(static_cast<int>(std::floor(v)), 0, in - 1);
    *i1 = std::clamp(static_cast<int>(std::ceil(v)), 0, in - 1);
    *frac = v - static_cast<float>(*i0);
  }
  // The input range [*lo, *hi) that outputs [o0, o0 + count) read.
  void Range(bool bilinear, int o0, int count, int* lo, int* hi) const {
    *lo = in, *hi = 0;
    for (int o = o0; o < o0 + count; ++o) {
      int a, b;
      float f;
      if (bilinear) {
        Linear(o, &a, &b, &f);
      } else {
        a = b = Nearest(o);
      }
      *lo = std::min(*lo, a);
      *hi = std::max(*hi, b + 1);
    }
    if (*hi <= *lo) *lo = *hi = 0;
  }
};

class ResizeOp : public Op, public Chunker {
 public:
  ResizeOp(const NodeInfo& node, bool bilinear, const tfl::ResizeParams& p, int oh, int ow,
           bool integer)
      : Op(node, {node.inputs[0]}, {node.outputs[0]}),
        bilinear_(bilinear),
        integer_(integer),
        params_(p),
        oh_(oh),
        ow_(ow) {}
  // A chunk: output rows [r0, r0 + out.size[1]) and columns [c0, ...) of the whole resize
  // (input h x w), reading the input box that starts at row ih0, column iw0.
  ResizeOp(const ResizeOp& whole, const Shape& in, const Box& out, const Box& in_box)
      : Op(whole.node_index()),
        bilinear_(whole.bilinear_),
        integer_(whole.integer_),
        params_(whole.params_),
        oh_(out.size[1]),
        ow_(out.size[2]),
        chunk_(true),
        whole_h_(in[1]),
        whole_w_(in[2]),
        whole_oh_(whole.oh_),
        whole_ow_(whole.ow_),
        r0_(out.begin[1]),
        c0_(out.begin[2]),
        ih0_(in_box.begin[1]),
        iw0_(in_box.begin[2]) {}

  const char* type_name() const override {
    return bilinear_ ? "RESIZE_BILINEAR" : "RESIZE_NEAREST_NEIGHBOR";
  }
  std::string algorithm() const override { return vec4_ ? "gather_vec4" : "gather"; }
  const Chunker* chunker() const override { return this; }

  std::vector<Shape> InferShapes(const std::vector<Shape>& in) const override {
    if (in[0].size() != 4) throw Error(std::string(type_name()) + " needs a 4-D input");
    return {{in[0][0], oh_, ow_, in[0][3]}};
  }
  double Flops(const std::vector<Shape>&, const std::vector<Shape>& out) const override {
    // Bilinear: 4 products of 3 factors and 3 sums per element.
    return bilinear_ ? 11.0 * double(NumElements(out[0])) : 0.0;
  }

  // Chunks are boxes of the output; each reads the input rows and columns its outputs
  // sample, and the same images and channels.
  bool GetChunkSpec(const std::vector<Shape>& in, ChunkSpec* spec) const override {
    spec->views = {in[0], InferShapes(in)[0]};
    spec->axes = {0, 1, 2, 3};
    return true;
  }
  std::vector<Box> ChunkInputs(const std::vector<Shape>& in, const Box& out) const override {
    Box box = out;
    int lo, hi;
    AxisOf(in[0][1], oh_).Range(bilinear_, out.begin[1], out.size[1], &lo, &hi);
    box.begin[1] = lo, box.size[1] = hi - lo;
    AxisOf(in[0][2], ow_).Range(bilinear_, out.begin[2], out.size[2], &lo, &hi);
    box.begin[2] = lo, box.size[2] = hi - lo;
    return {box};
  }
  std::unique_ptr<Op> MakeChunk(const std::vector<Shape>& in, const Box& out) const override {
    return std::make_unique<ResizeOp>(*this, in[0], out, ChunkInputs(in, out)[0]);
  }

  void Prepare(OpContext& ctx, const std::vector<Shape>& in_shapes,
               const std::vector<Shape>& out_shapes, const std::vector<cl_mem>& in,
               const std::vector<cl_mem>& out) override {
    const Shape& s = in_shapes[0];
    const Shape& o = out_shapes[0];
    const int n = s[0], h = s[1], w = s[2], c = s[3];
    // Whole: the tables index this input; a chunk: its box (origin ih0_, iw0_).
    const Axis ya = AxisOf(chunk_ ? whole_h_ : h, chunk_ ? whole_oh_ : oh_);
    const Axis xa = AxisOf(chunk_ ? whole_w_ : w, chunk_ ? whole_ow_ : ow_);
    std::vector<int> rows, cols;
    std::vector<float> fy, fx;
    auto table = [&](const Axis& a, int o0, int count, int origin, int limit, std::vector<int>* idx,
                     std::vector<float>* frac) {
      for (int i = o0; i < o0 + count; ++i) {
        if (bilinear_) {
          int i0, i1;
          float f;
          a.Linear(i, &i0, &i1, &f);
          idx->push_back(std::clamp(i0 - origin, 0, limit - 1));
          idx->push_back(std::clamp(i1 - origin, 0, limit - 1));
          frac->push_back(f);
        } else {
          idx->push_back(std::clamp(a.Nearest(i) - origin, 0, limit - 1));
        }
      }
    };
    table(ya, r0_, o[1], ih0_, h, &rows, &fy);
    table(xa, c0_, o[2], iw0_, w, &cols, &fx);
    rows_ = UploadInts(ctx, rows);
    cols_ = UploadInts(ctx, cols);
    if (bilinear_ && integer_) {
      // Integer weights in 1/1024 (exact in the float tables), one work-item per element.
      vec4_ = false;
      fy_ = UploadInts(ctx, std::vector<int>(fy.begin(), fy.end()));
      fx_ = UploadInts(ctx, std::vector<int>(fx.begin(), fx.end()));
      Launch l;
      l.name = "resize_bilinear_int8";
      l.kernel = CreateKernel(*ctx.GetProgram("resize"), l.name);
      SetArgs(l.kernel, in[0], out[0], h, w, c, o[1], o[2], rows_.get(), cols_.get(), fy_.get(),
              fx_.get());
      l.dims = 3;
      l.global[0] = RoundUp(size_t(o[2]) * c, kGroup);
      l.global[1] = o[1];
      l.global[2] = n;
      l.local[0] = kGroup, l.local[1] = l.local[2] = 1;
      launches_.clear();
      launches_.push_back(std::move(l));
      return;
    }
    vec4_ = c % 4 == 0;
    const int cv = vec4_ ? c / 4 : c;
    auto prog = ctx.GetProgram("resize");
    Launch l;
    l.name = std::string(bilinear_ ? "resize_bilinear" : "resize_nearest") + (vec4_ ? "_c4" : "");
    l.kernel = CreateKernel(*prog, l.name);
    if (bilinear_) {
      fy_ = UploadFloat32(ctx, fy);
      fx_ = UploadFloat32(ctx, fx);
      SetArgs(l.kernel, in[0], out[0], h, w, cv, o[1], o[2], rows_.get(), cols_.get(), fy_.get(),
              fx_.get());
    } else {
      SetArgs(l.kernel, in[0], out[0], h, w, cv, o[1], o[2], rows_.get(), cols_.get());
    }
    // Rows padded to whole work-groups (OpenCL 1.2 local sizes divide the global ones).
    l.dims = 3;
    l.global[0] = RoundUp(size_t(o[2]) * cv, kGroup);
    l.global[1] = o[1];
    l.global[2] = n;
    l.local[0] = kGroup, l.local[1] = l.local[2] = 1;
    launches_.clear();
    launches_.push_back(std::move(l));
  }

 private:
  Axis AxisOf(int in, int out) const {
    return Axis{in, out, params_.align_corners, params_.half_pixel_centers, integer_};
  }

  bool bilinear_;
  bool integer_;  // int8 / uint8 values: the CPU's 8-bit indexing
  tfl::ResizeParams params_;
  int oh_, ow_;  // this op's output size (a chunk's: its box)
  bool chunk_ = false;
  int whole_h_ = 0, whole_w_ = 0, whole_oh_ = 0, whole_ow_ = 0;
  int r0_ = 0, c0_ = 0, ih0_ = 0, iw0_ = 0;
  bool vec4_ = false;
  Buffer rows_, cols_, fy_, fx_;
};

// The constant output size (height, width), or a reason it is unusable.
std::string OutputSize(const GraphView& g, const NodeInfo& node, int* oh, int* ow) {
  std::vector<int64_t> size;
  if (auto why = g.ReadConstantInts(node.inputs[1], "output size", &size); !why.empty()) return why;
  // TFLite's kernels want a 1-D size of 2: a [1, 2] one fails their Prepare.
  if (g.shape(node.inputs[1]).size() != 1 || size.size() != 2)
    return "size must be 1-D with 2 elements, not " + ShapeString(g.shape(node.inputs[1]));
  if (size[0] < 1 || size[1] < 1 || size[0] > (1 << 24) || size[1] > (1 << 24))
    return "output size " + std::to_string(size[0]) + "x" + std::to_string(size[1]) +
           " is out of range";
  *oh = static_cast<int>(size[0]);
  *ow = static_cast<int>(size[1]);
  return "";
}

std::string CheckResize(const GraphView& g, const NodeInfo& node, bool bilinear) {
  if (!node.builtin_data) return "missing resize params";
  if (node.inputs.size() != 2 || node.outputs.size() != 1) return "unexpected input/output count";
  tfl::ResizeParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  // The CPU kernel refuses this combination; leave it the error it reports.
  if (bilinear && p.align_corners && p.half_pixel_centers)
    return "align_corners together with half_pixel_centers is not supported";
  const ValueType t =
      g.valid_tensor(node.inputs[0]) ? g.value_type(node.inputs[0]) : ValueType::kFloat;
  if (IsQuantized(t)) {
    for (int x : {node.inputs[0], node.outputs[0]})
      if (auto why = CheckQuantActivation(g, x, t); !why.empty()) return why;
    if (bilinear && t == ValueType::kUInt8) return "uint8 RESIZE_BILINEAR is not supported";
  } else if (auto why = CheckFloatTensors(g, {node.inputs[0], node.outputs[0]}); !why.empty()) {
    return why;
  }
  if (g.shape(node.inputs[0]).size() != 4) return "input must be 4-D (NHWC)";
  int oh, ow;
  return OutputSize(g, node, &oh, &ow);
}

std::unique_ptr<Op> Create(const NodeInfo& node, const GraphView& g, bool bilinear) {
  tfl::ResizeParams p;
  std::memcpy(&p, node.builtin_data, sizeof p);
  int oh = 1, ow = 1;
  if (auto why = OutputSize(g, node, &oh, &ow); !why.empty()) throw Error(why);
  return std::make_unique<ResizeOp>(node, bilinear, p, oh, ow,
                                    IsQuantized(g.value_type(node.inputs[0])));
}

std::string Describe(const NodeInfo& n) {
  tfl::ResizeParams p;
  std::memcpy(&p, n.builtin_data, sizeof p);
  return "align_corners=" + std::to_string(int(p.align_corners)) +
         " half_pixel_centers=" + std::to_string(int(p.half_pixel_centers));
}

// Bilinear: 4 weighted taps per element.
double BilinearWork(const GraphView& g, const NodeInfo& n) {
  if (n.outputs.empty() || !g.valid_tensor(n.outputs[0])) return 0;
  return 11.0 * static_cast<double>(NumElements(g.shape(n.outputs[0])));
}

}  // namespace

extern const OpHandler kResizeBilinearHandler = {
    tfl::kResizeBilinear,
    "RESIZE_BILINEAR",
    [](const GraphView& g, const NodeInfo& n) { return CheckResize(g, n, true); },
    [](const GraphView& g, const NodeInfo& n) { return Create(n, g, true); },
    Describe,
    BilinearWork};
extern const OpHandler kResizeNearestNeighborHandler = {
    tfl::kResizeNearestNeighbor, "RESIZE_NEAREST_NEIGHBOR",
    [](const GraphView& g, const NodeInfo& n) { return CheckResize(g, n, false); },
    [](const GraphView& g, const NodeInfo& n) { return Create(n, g, false); }, Describe};

}  // namespace clgpu
