#include "ops/op.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "cl/errors.h"
#include "cl/loader.h"
#include "common/error.h"
#include "common/half.h"
#include "tflite/builtin.h"

namespace clgpu {

size_t RoundUp(size_t x, size_t m) { return (x + m - 1) / m * m; }

OpContext OpContext::ForValues(ValueType t) const {
  OpContext c = *this;
  if (t == values) return c;
  // The storage define leads the defines (delegate's MakeOpContext); the rest stay as they are.
  std::string rest;
  for (size_t b = 0; b < storage_defines.size();) {
    size_t e = storage_defines.find(' ', b);
    if (e == std::string::npos) e = storage_defines.size();
    const std::string word = storage_defines.substr(b, e - b);
    if (!word.empty() && word.rfind("-DSTORAGE_", 0) != 0) rest += (rest.empty() ? "" : " ") + word;
    b = e + 1;
  }
  const char* add = t == ValueType::kInt8                        ? "-DSTORAGE_INT8"
                    : t == ValueType::kUInt8                     ? "-DSTORAGE_UINT8"
                    : t == ValueType::kFloat && float_bytes == 2 ? "-DSTORAGE_HALF"
                                                                 : "";
  c.storage_defines = *add ? std::string(add) + (rest.empty() ? "" : " " + rest) : rest;
  c.values = t;
  c.storage_bytes = ElementBytes(t);
  return c;
}

OpContext OpContext::WithFloat32Storage() const {
  OpContext c = *this;
  c.float_bytes = 4;
  if (values == ValueType::kFloat) c.storage_bytes = 4;
  const std::string half = "-DSTORAGE_HALF";
  if (const size_t at = c.storage_defines.find(half); at != std::string::npos) {
    c.storage_defines.erase(at, half.size());
    while (!c.storage_defines.empty() && c.storage_defines[0] == ' ') c.storage_defines.erase(0, 1);
  }
  return c;
}

std::string DescribeNode(const OpHandler& h, const NodeInfo& node) {
  if (!node.builtin_data) return "no params";
  return h.describe ? h.describe(node) : "";
}

double NodeWork(const GraphView& g, const OpHandler& h, const NodeInfo& node) {
  if (h.flat_copy) return 0;  // a memcpy on either side
  if (h.work) return h.work(g, node);
  if (node.outputs.empty() || !g.valid_tensor(node.outputs[0])) return 0;
  return static_cast<double>(NumElements(g.shape(node.outputs[0])));
}

double FilterWork(const GraphView& g, const NodeInfo& node, int out_channel_axis) {
  if (node.outputs.empty() || !g.valid_tensor(node.outputs[0]) || node.inputs.size() < 2 ||
      !g.valid_tensor(node.inputs[1]))
    return 0;
  const Shape w = g.shape(node.inputs[1]);
  if (w.empty()) return 0;
  const int axis = out_channel_axis < 0 ? static_cast<int>(w.size()) - 1 : out_channel_axis;
  const double out = static_cast<double>(NumElements(g.shape(node.outputs[0])));
  return 2.0 * out * static_cast<double>(NumElements(w)) / std::max(w[axis], 1);
}

std::string JoinParamInts(const int* v, int n) {
  std::string out;
  for (int i = 0; i < std::min(std::max(n, 0), tfl::kMaxParamDims); ++i)
    out += (i ? "," : "") + std::to_string(v[i]);
  return out;
}

void Op::FuseResidual(int residual, int output, const ResidualAdd& add) {
  UnfuseResidual();
  if (outputs_.size() != 1) throw Error("only an op with one output can fold in an ADD");
  own_output_ = outputs_[0];
  inputs_.push_back(residual);
  outputs_[0] = output;
  residual_ = Residual{true, add.act_min, add.act_max, add.quant};
}

bool Op::FoldClamp(int output, float lo, float hi) {
  float own_lo, own_hi;
  if (clamp_.on || residual_.on || outputs_.size() != 1 || !GetClamp(&own_lo, &own_hi))
    return false;
  // clamp(clamp(x, a, b), c, d) = clamp(x, max(a, c), min(b, d)) when the ranges overlap.
  const float new_lo = std::max(own_lo, lo), new_hi = std::min(own_hi, hi);
  if (new_lo > new_hi) return false;
  clamp_ = ClampFold{true, own_lo, own_hi, outputs_[0]};
  SetClamp(new_lo, new_hi);
  outputs_[0] = output;
  return true;
}

void Op::UnfoldClamp() {
  if (!clamp_.on) return;
  SetClamp(clamp_.lo, clamp_.hi);
  outputs_[0] = clamp_.own_output;
  clamp_ = ClampFold{};
}

bool Op::FoldEpilogue(int output, int kind, float alpha, std::vector<PostClamp> post) {
  float lo, hi;
  if (kind == 0 || has_epilogue() || residual_.on || outputs_.size() != 1 ||
      post.size() > kMaxPostClamps || !GetClamp(&lo, &hi))
    return false;
  epilogue_ = Epilogue{kind, alpha, outputs_[0], {}, std::move(post)};
  outputs_[0] = output;
  return true;
}

void Op::FoldSqueeze(std::vector<Op*> dense, int output) {
  UnfoldSqueeze();
  if (outputs_.size() != 1 || dense.empty()) throw Error("a squeeze needs one output, a dense op");
  squeeze_ = SqueezeFold{std::move(dense), outputs_[0]};
  outputs_[0] = output;
}

void Op::UnfoldSqueeze() {
  if (squeeze_.dense.empty()) return;
  outputs_[0] = squeeze_.own_output;
  squeeze_ = SqueezeFold{};
}

void Op::FoldPad(int input, InputPad pad) {
  UnfoldPad();
  if (inputs_.empty()) throw Error("a PAD fold needs an input");
  pad_ = PadFold{true, inputs_[0], pad};
  inputs_[0] = input;
}

void Op::UnfoldPad() {
  if (!pad_.on) return;
  inputs_[0] = pad_.own_input;
  pad_ = PadFold{};
}

void Op::FoldDepthwise(Op* dw, int input, Shape shape) {
  UnfoldDepthwise();
  if (inputs_.empty() || !dw) throw Error("a depthwise fold needs an input and its op");
  depthwise_ = DepthwiseFold{dw, inputs_[0], std::move(shape), nullptr, -1, {}};
  inputs_[0] = input;
}

void Op::UnfoldDepthwise() {
  if (!depthwise_.op) return;
  inputs_[0] = depthwise_.own_input;
  depthwise_ = DepthwiseFold{};
}

void Op::FoldExpand(Op* ex, int input, Shape shape) {
  if (!depthwise_.op || depthwise_.expand || !ex)
    throw Error("an expand fold needs a folded depthwise and its op");
  depthwise_.expand = ex;
  depthwise_.dw_input = inputs_[0];
  depthwise_.expand_shape = std::move(shape);
  inputs_[0] = input;
}

bool Op::FoldTable(int output, std::vector<uint8_t> table) {
  if (!TakesTable() || table.size() != 256 || has_epilogue() || residual_.on ||
      outputs_.size() != 1)
    return false;
  epilogue_ = Epilogue{kTableEpilogue, 0.0f, outputs_[0], std::move(table)};
  outputs_[0] = output;
  return true;
}

void Op::UnfoldEpilogue() {
  if (!has_epilogue()) return;
  outputs_[0] = epilogue_.own_output;
  epilogue_ = Epilogue{};
}

namespace {
// A float as an OpenCL C literal: a model may carry a non-finite value; "inff" is no literal.
std::string FloatLiteral(float a) {
  char buf[32];
  if (std::isnan(a))
    std::snprintf(buf, sizeof buf, "NAN");
  else if (std::isinf(a))
    std::snprintf(buf, sizeof buf, "%sINFINITY", a < 0 ? "-" : "");
  else
    std::snprintf(buf, sizeof buf, "%.9ef", a);
  return buf;
}
}  // namespace

std::string Op::epilogue_defines() const {
  if (!has_epilogue()) return "";
  if (epilogue_.kind == kTableEpilogue) return "-DQUANT_TABLE";
  std::string d = "-DCLGPU_EPILOGUE=" + std::to_string(epilogue_.kind);
  const float a = epilogue_.alpha;
  if (a != 0 || epilogue_.kind == 8)  // LEAKY_RELU reads its alpha, 0 included
    d += " -DCLGPU_EPILOGUE_ALPHA=" + FloatLiteral(a);
  // kernels/common.cl's POST_CLAMP<i>: 1 MAXIMUM, 2 MINIMUM; +2 when the constant comes first.
  for (size_t i = 0; i < epilogue_.post.size(); ++i) {
    const PostClamp& c = epilogue_.post[i];
    const std::string n = std::to_string(i + 1);
    d += " -DCLGPU_POST" + n + "=" + std::to_string((c.maximum ? 1 : 2) + (c.chain_first ? 0 : 2)) +
         " -DCLGPU_POST" + n + "_C=" + FloatLiteral(c.value);
  }
  return d;
}

StridedView ContiguousView(const Shape& s) {
  StridedView v{s, std::vector<int64_t>(s.size(), 1)};
  for (int a = static_cast<int>(s.size()) - 2; a >= 0; --a)
    v.strides[a] = v.strides[a + 1] * s[a + 1];
  return v;
}

void Op::FoldInputView(size_t i, int source, StridedView view) {
  if (i >= inputs_.size()) throw Error("no operand " + std::to_string(i) + " to fold a view into");
  if (in_views_.size() < inputs_.size()) in_views_.resize(inputs_.size());
  ViewFold& f = in_views_[i];
  if (!f.on) f.own_tensor = inputs_[i];
  f.on = true;
  f.view = std::move(view);
  inputs_[i] = source;
}

void Op::FoldOutputView(int output, StridedView view, float scale) {
  if (outputs_.size() != 1) throw Error("only an op with one output can fold an output view");
  if (!out_view_.on) out_view_.own_tensor = outputs_[0];
  out_view_.on = true;
  out_view_.view = std::move(view);
  out_view_.scale = scale;
  outputs_[0] = output;
}

void Op::UnfoldViews() {
  for (size_t i = 0; i < in_views_.size(); ++i)
    if (in_views_[i].on) inputs_[i] = in_views_[i].own_tensor;
  in_views_.clear();
  if (out_view_.on) outputs_[0] = out_view_.own_tensor;
  out_view_ = ViewFold{};
}

void Op::UnfuseResidual() {
  if (!residual_.on) return;
  inputs_.pop_back();
  outputs_[0] = own_output_;
  residual_ = Residual{};
}

Buffer UploadBytes(OpContext& ctx, const void* data, size_t bytes) {
  Buffer buf = ctx.env.CreateBuffer(bytes, CL_MEM_READ_ONLY);
  if (bytes) {
    CheckCl(Cl().clEnqueueWriteBuffer(ctx.queue, buf.get(), CL_TRUE, 0, bytes, data, 0, nullptr,
                                      nullptr),
            "clEnqueueWriteBuffer(weights)");
  }
  return buf;
}

Buffer UploadWeights(OpContext& ctx, const std::vector<float>& data) {
  if ((ctx.values == ValueType::kFloat ? ctx.storage_bytes : ctx.float_bytes) == 2) {
    std::vector<uint16_t> h(data.size());
    for (size_t i = 0; i < data.size(); ++i) h[i] = FloatToHalf(data[i]);
    return UploadBytes(ctx, h.data(), h.size() * 2);
  }
  return UploadFloat32(ctx, data);
}

Buffer UploadFloat32(OpContext& ctx, const std::vector<float>& data) {
  return UploadBytes(ctx, data.data(), data.size() * sizeof(float));
}

Buffer ZeroBuffer(OpContext& ctx, size_t bytes) {
  Buffer buf = ctx.env.CreateBuffer(bytes, CL_MEM_READ_WRITE);
  if (bytes) {
    const std::vector<char> zeros(bytes, 0);
    CheckCl(Cl().clEnqueueWriteBuffer(ctx.queue, buf.get(), CL_TRUE, 0, bytes, zeros.data(), 0,
                                      nullptr, nullptr),
            "clEnqueueWriteBuffer(zeros)");
  }
  return buf;
}

Buffer UploadInts(OpContext& ctx, const std::vector<int>& data) {
  return UploadBytes(ctx, data.data(), data.size() * sizeof(int));
}

std::string CheckFloatTensors(const GraphView& g, const std::vector<int>& tensors) {
  for (int t : tensors) {
    if (!g.valid_tensor(t)) return "tensor index " + std::to_string(t) + " is invalid";
    // Float32, or a float constant of ours: a folded DEQUANTIZE, dequantized int8 weights.
    if (g.value_type(t) != ValueType::kFloat) return "tensor " + g.name(t) + " is not float32";
    if (!g.tensor(t).dims) return "tensor " + g.name(t) + " has no shape";
  }
  return "";
}

size_t RowGroup(OpContext& ctx, const Kernel& k, size_t limit, int64_t row) {
  size_t fits = 0;
  CheckCl(Cl().clGetKernelWorkGroupInfo(k.get(), ctx.env.device().id, CL_KERNEL_WORK_GROUP_SIZE,
                                        sizeof fits, &fits, nullptr),
          "clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)");
  fits = std::min<size_t>({fits, ctx.env.device().max_work_group_size, limit});
  size_t group = 1;
  while (group * 2 <= fits && static_cast<int64_t>(group) < row) group *= 2;
  return group;
}

}  // namespace clgpu
