#include "ops/op.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "cl/errors.h"
#include "cl/loader.h"
#include "common/env.h"
#include "common/error.h"
#include "common/half.h"
#include "common/log.h"
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

Attachments Op::NewAttachments() const {
  Attachments a;
  a.inputs = inputs_;
  a.outputs = outputs_;
  return a;
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
  const Attachments::Epilogue& e = att().epilogue;
  if (e.kind == 0) return "";
  if (e.kind == kTableEpilogue)
    return e.table.size() > 256 ? "-DQUANT_TABLE -DQUANT_TABLE_CHANNELS" : "-DQUANT_TABLE";
  if (e.kind == kSlopeEpilogue) return "-DCHANNEL_SLOPES";
  std::string d = "-DCLGPU_EPILOGUE=" + std::to_string(e.kind);
  const float a = e.alpha;
  if (a != 0 || e.kind == 8)  // LEAKY_RELU reads its alpha, 0 included
    d += " -DCLGPU_EPILOGUE_ALPHA=" + FloatLiteral(a);
  // kernels/common.cl's POST_CLAMP<i> (PostClamp::Code).
  for (size_t i = 0; i < e.post.size(); ++i) {
    const PostClamp& c = e.post[i];
    const std::string n = std::to_string(i + 1);
    d += " -DCLGPU_POST" + n + "=" + std::to_string(c.Code()) + " -DCLGPU_POST" + n +
         "_C=" + FloatLiteral(c.value);
  }
  return d;
}

StridedView ContiguousView(const Shape& s) {
  StridedView v{s, std::vector<int64_t>(s.size(), 1)};
  for (int a = static_cast<int>(s.size()) - 2; a >= 0; --a)
    v.strides[a] = v.strides[a + 1] * s[a + 1];
  return v;
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

std::vector<float> ReadBackFloats(OpContext& ctx, cl_mem m, size_t count, size_t elem) {
  if (BufferBytes(m) < count * elem) throw Error("a constant buffer is shorter than its values");
  std::vector<char> raw(count * elem);
  CheckCl(Cl().clEnqueueReadBuffer(ctx.queue, m, CL_TRUE, 0, raw.size(), raw.data(), 0, nullptr,
                                   nullptr),
          "clEnqueueReadBuffer(constants)");
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) {
    if (elem == 2) {
      uint16_t h;
      std::memcpy(&h, &raw[i * 2], 2);
      out[i] = HalfToFloat(h);
    } else {
      std::memcpy(&out[i], &raw[i * 4], 4);
    }
  }
  return out;
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

size_t BufferBytes(cl_mem m) {
  size_t bytes = 0;
  CheckCl(Cl().clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof bytes, &bytes, nullptr),
          "clGetMemObjectInfo(CL_MEM_SIZE)");
  return bytes;
}

bool PackedLayout(const std::vector<size_t>& sizes, std::vector<int>* offsets) {
  constexpr size_t max_bytes = size_t(64) << 10;
  offsets->clear();
  if (EnvSwitch("CLGPU_PACK_CONSTS") == false) return false;
  size_t total = 0;
  for (size_t bytes : sizes) {
    total = RoundUp(total, 16);
    offsets->push_back(static_cast<int>(total));
    total += bytes;
    if (total > max_bytes) return false;
  }
  return true;
}

bool PackConstants(OpContext& ctx, const std::vector<cl_mem>& parts, Buffer* out,
                   std::vector<int>* offsets) {
  *out = Buffer();
  std::vector<size_t> sizes;
  for (cl_mem m : parts) {
    if (!m) return false;  // an absent buffer stays a null argument
    sizes.push_back(BufferBytes(m));
  }
  if (!PackedLayout(sizes, offsets)) return false;
  const size_t total = offsets->empty() ? 0 : size_t(offsets->back()) + sizes.back();
  Buffer b = ctx.env.CreateBuffer(std::max<size_t>(total, 1), CL_MEM_READ_ONLY);
  for (size_t i = 0; i < parts.size(); ++i)
    if (sizes[i])
      CheckCl(Cl().clEnqueueCopyBuffer(ctx.queue, parts[i], b.get(), 0, size_t((*offsets)[i]),
                                       sizes[i], 0, nullptr, nullptr),
              "clEnqueueCopyBuffer(constants)");
  *out = std::move(b);
  return true;
}

void ParamBlock::Float(size_t i, float v) { std::memcpy(&prm_.at(i), &v, sizeof v); }

std::string ParamBlock::Upload(OpContext& ctx) {
  std::vector<size_t> sizes = {prm_.size() * sizeof(int)};
  for (const auto& slot : slots_) sizes.push_back(BufferBytes(slot.second));
  // Packed, the offsets must be in the integers before they are copied: the layout first.
  std::vector<int> at;
  const bool packed = PackedLayout(sizes, &at);
  if (packed)
    for (size_t i = 0; i < slots_.size(); ++i) prm_.at(slots_[i].first) = at[i + 1];
  Buffer prm = UploadInts(ctx, prm_);
  args_ = {prm.get()};
  for (const auto& slot : slots_) args_.push_back(slot.second);
  if (packed && PackConstants(ctx, args_, &kept_, &at)) {
    args_ = {kept_.get()};
    return "-DPACKED";
  }
  kept_ = std::move(prm);
  return "";
}

cl_uint ParamBlock::Set(const Kernel& k, cl_uint first) const {
  for (cl_mem m : args_) SetArgsFrom(k, first++, m);
  return first;
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

size_t BlockLocalFloats(const DeviceInfo& dev) {
  return size_t(std::min<uint64_t>(dev.local_mem_bytes * 7 / 8, 44 * 1024) / sizeof(float));
}

size_t KernelGroupLimit(const OpContext& ctx, const Kernel& k) {
  size_t fits = 0;
  CheckCl(Cl().clGetKernelWorkGroupInfo(k.get(), ctx.env.device().id, CL_KERNEL_WORK_GROUP_SIZE,
                                        sizeof fits, &fits, nullptr),
          "clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)");
  return fits;
}

bool BlockGroupFits(const OpContext& ctx, const Kernel& k, size_t group, const char* what) {
  const size_t fits = KernelGroupLimit(ctx, k);
  if (fits >= group) return true;
  if (LogEnabled(LogLevel::kDebug))
    Log(LogLevel::kDebug, std::string(what) + ": groups of " + std::to_string(group) +
                              " work-items do not fit this compiler's build (at most " +
                              std::to_string(fits) + "); the block runs as separate kernels");
  return false;
}

size_t RowGroup(OpContext& ctx, const Kernel& k, size_t limit, int64_t row) {
  const size_t fits =
      std::min<size_t>({KernelGroupLimit(ctx, k), ctx.env.device().max_work_group_size, limit});
  size_t group = 1;
  while (group * 2 <= fits && static_cast<int64_t>(group) < row) group *= 2;
  return group;
}

bool Op::PrepareChain(OpContext& ctx, const Shape& out_shape, const std::vector<cl_mem>& in,
                      const std::vector<cl_mem>& out) {
  if (!chained()) return false;
  constexpr size_t kGroup = 64;
  chain_meta_ = UploadInts(ctx, ChainMeta(att().chain.stages));
  const int total = static_cast<int>(NumElements(out_shape));
  Launch l;
  l.name = "gather_chain";
  l.kernel = CreateKernel(*ctx.GetProgram("gather_chain"), l.name);
  SetArgs(l.kernel, in.at(0), out.at(0), total, chain_meta_.get());
  l.global[0] = RoundUp(static_cast<size_t>(std::max(total, 1)), kGroup);
  l.local[0] = kGroup;
  launches_.clear();
  launches_.push_back(std::move(l));
  return true;
}

}  // namespace clgpu
