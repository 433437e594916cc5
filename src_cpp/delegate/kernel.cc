// The kernel of one delegated partition: built at init (ops, weights), planned
// at prepare (shapes, device buffers, launches), run at invoke with one upload
// per input, every kernel enqueued without host sync, and one read-back.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "common/error.h"
#include "common/log.h"
#include "delegate/delegate.h"
#include "common/half.h"
#include "ops/op.h"
#include "runtime/memory_planner.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

class PartitionKernel {
 public:
  PartitionKernel(TfLiteContext* ctx, const TfLiteDelegateParams* params);
  ~PartitionKernel() { core_->DropMemoryReport(id_); }
  TfLiteStatus Prepare(TfLiteContext* ctx);
  TfLiteStatus Invoke(TfLiteContext* ctx);

 private:
  enum class Kind { kInput, kConstant, kInternal, kOutput };
  struct Value {
    Kind kind = Kind::kInternal;
    bool is_partition_output = false;
    Shape shape;
    Buffer buffer;  // constants: own buffer; activations: a view into arena_
    std::vector<float> constant;  // host copy for constants
    // fp16 storage: the float32 copy TFLite's tensor is transferred through, and
    // the kernel converting it to / from the storage buffer.
    Buffer staging;
    Launch convert;
  };
  void Plan(TfLiteContext* ctx);
  void CaptureValues();
  OpContext MakeOpContext();

  struct OpProfile {
    std::string shape;
    double flops = 0, bytes = 0;
  };
  void RecordProfile(const std::vector<Event>& events, const std::vector<int>& event_op,
                     const std::vector<int64_t>& event_bytes, double wall_ns, int kernels);

  std::shared_ptr<DelegateCore> core_;
  int id_ = 0;
  std::vector<std::unique_ptr<Op>> ops_;
  std::vector<OpProfile> op_profiles_;
  Buffer arena_;  // every activation of the partition, placed by the memory planner
  cl_mem Mem(int t) const { return values_.at(t).buffer.get(); }
  std::map<int, Value> values_;
  std::vector<int> uploads_, downloads_;  // tensor indices, in a fixed order
  bool planned_ = false;
  cl_event last_event_ = nullptr;  // out-parameter of the enqueue being issued
};

PartitionKernel::PartitionKernel(TfLiteContext* ctx, const TfLiteDelegateParams* params)
    : core_(DelegateCore::From(params->delegate)->shared()) {
  if (!core_) throw Error("the delegate was destroyed before its kernels were created");
  id_ = core_->NextPartitionId();
  const GraphView* graph = core_->current_graph();
  if (!graph) throw Error("kernel init outside delegate Prepare");
  if (core_->options().fail_at == "init") throw Error("injected failure at kernel init (fail_at)");
  const std::set<int> outputs(params->output_tensors->data,
                              params->output_tensors->data + params->output_tensors->size);
  const std::set<int> inputs(params->input_tensors->data,
                             params->input_tensors->data + params->input_tensors->size);
  for (int i = 0; i < params->nodes_to_replace->size; ++i) {
    bool ok = false;
    NodeInfo node = ReadNode(ctx, params->nodes_to_replace->data[i], &ok);
    if (!ok) throw Error("cannot read node " + std::to_string(params->nodes_to_replace->data[i]));
    if (node.op == tfl::kDequantize) {
      // A folded weight: its value is a constant of this partition.
      Value& v = values_[node.outputs[0]];
      v.kind = Kind::kConstant;
      v.shape = graph->shape(node.outputs[0]);
      v.constant = graph->ConstantFloats(node.outputs[0]);
      v.is_partition_output = outputs.count(node.outputs[0]) != 0;
      continue;
    }
    const OpHandler* h = FindOpHandler(node.op);
    if (!h) throw Error("node " + std::to_string(node.index) + " is not ours");
    ops_.push_back(h->create(*graph, node));
    const Op& op = *ops_.back();
    for (int t : op.inputs()) {
      if (values_.count(t)) continue;
      Value& v = values_[t];
      if (graph->IsConstant(t)) {
        v.kind = Kind::kConstant;
        v.shape = graph->shape(t);
        v.constant = graph->ConstantFloats(t);
      } else if (inputs.count(t)) {
        v.kind = Kind::kInput;
      }
    }
    for (int t : op.outputs()) {
      Value& v = values_[t];
      v.is_partition_output = outputs.count(t) != 0;
      v.kind = v.is_partition_output ? Kind::kOutput : Kind::kInternal;
    }
  }
  for (auto& [t, v] : values_) {
    if (v.kind == Kind::kInput) uploads_.push_back(t);
    if (v.is_partition_output) downloads_.push_back(t);
  }
  core_->CountKernelCreated();
}

OpContext PartitionKernel::MakeOpContext() {
  OpContext c{core_->env(), core_->queue(), core_->options(), core_->storage_defines(),
              core_->storage_bytes(), core_->disk_cache()};
  return c;
}

void PartitionKernel::Plan(TfLiteContext* ctx) {
  // Current shapes of the inputs decide everything else.
  bool changed = !planned_;
  for (int t : uploads_) {
    const TfLiteTensor& x = ctx->tensors[t];
    Shape s = x.dims ? Shape(x.dims->data, x.dims->data + x.dims->size) : Shape{};
    if (x.type != kTfLiteFloat32) throw Error("partition input " + std::to_string(t) + " is not float32");
    if (s != values_[t].shape) {
      values_[t].shape = s;
      changed = true;
    }
  }
  if (!changed) return;
  OpContext octx = MakeOpContext();
  Environment& env = core_->env();
  for (auto& [t, v] : values_) {
    if (v.kind == Kind::kConstant && !v.buffer) v.buffer = UploadWeights(octx, v.constant);
  }
  std::vector<std::vector<Shape>> out_shapes(ops_.size());
  for (size_t i = 0; i < ops_.size(); ++i) {
    std::vector<Shape> in;
    for (int t : ops_[i]->inputs()) in.push_back(values_.at(t).shape);
    out_shapes[i] = ops_[i]->InferShapes(in);
    for (size_t j = 0; j < out_shapes[i].size(); ++j)
      values_[ops_[i]->outputs()[j]].shape = out_shapes[i][j];
  }
  if (core_->options().fail_at == "alloc")
    throw ClError("clCreateBuffer", CL_MEM_OBJECT_ALLOCATION_FAILURE, "injected (fail_at=alloc)");
  // Lifetimes in op steps: inputs are written before step 0, outputs are read
  // after the last step; the planner shares buffers between disjoint lifetimes.
  std::vector<int> planned;
  std::vector<TensorUsage> usage;
  std::map<int, size_t> index_of;
  const int end_step = static_cast<int>(ops_.size());
  for (auto& [t, v] : values_) {
    if (v.kind == Kind::kConstant) continue;
    TensorUsage u;
    u.bytes = std::max<size_t>(static_cast<size_t>(NumElements(v.shape)) * octx.storage_bytes, 4);
    u.first = v.kind == Kind::kInput ? 0 : end_step;
    u.last = v.is_partition_output ? end_step : 0;
    index_of[t] = usage.size();
    planned.push_back(t);
    usage.push_back(u);
  }
  for (int i = 0; i < end_step; ++i) {
    for (int t : ops_[i]->inputs())
      if (index_of.count(t)) usage[index_of[t]].last = std::max(usage[index_of[t]].last, i);
    for (int t : ops_[i]->outputs())
      if (index_of.count(t)) usage[index_of[t]].first = std::min(usage[index_of[t]].first, i);
  }
  for (TensorUsage& u : usage) u.last = std::max(u.last, u.first);
  if (core_->options().capture_tensors) {
    // Every activation must survive to the end of the invoke to be read back.
    for (TensorUsage& u : usage) u.first = 0, u.last = end_step;
  }
  const OffsetPlan plan =
      PlanOffsetsGreedyBySize(usage, env.device().base_addr_align_bytes);
  for (int t : planned) values_[t].buffer.Release();  // views go before their arena
  if (!arena_ || arena_.bytes() < plan.arena_bytes) {
    arena_.Release();
    arena_ = env.CreateBuffer(plan.arena_bytes);
  }
  for (size_t i = 0; i < planned.size(); ++i)
    values_[planned[i]].buffer = env.CreateSubBuffer(arena_, plan.offsets[i], usage[i].bytes);
  MemoryReport report;
  report.naive_bytes = plan.naive_bytes;
  report.lower_bound_bytes = plan.lower_bound_bytes;
  report.allocated_bytes = arena_.bytes();
  report.buffers = 1;
  if (core_->half_storage()) {
    auto prog = octx.GetProgram("convert");
    auto staged = [&](int t, bool upload) {
      Value& v = values_[t];
      const int n = static_cast<int>(NumElements(v.shape));
      v.staging = env.CreateBuffer(static_cast<size_t>(n) * sizeof(float));
      report.staging_bytes += v.staging.bytes();
      v.convert.name = upload ? "to_storage" : "from_storage";
      v.convert.kernel = CreateKernel(*prog, v.convert.name);
      if (upload) {
        SetArgs(v.convert.kernel, v.staging.get(), Mem(t), n);
      } else {
        SetArgs(v.convert.kernel, Mem(t), v.staging.get(), n);
      }
      v.convert.global[0] = std::max(n, 1);
    };
    for (int t : uploads_) staged(t, true);
    for (int t : downloads_)
      if (values_[t].kind != Kind::kConstant) staged(t, false);
  }
  for (int t : downloads_) {
    TfLiteTensor& x = ctx->tensors[t];
    const Shape& s = values_[t].shape;
    const Shape cur = x.dims ? Shape(x.dims->data, x.dims->data + x.dims->size) : Shape{};
    if (cur != s) {
      auto* dims = static_cast<TfLiteIntArray*>(std::malloc(sizeof(int) * (1 + s.size())));
      if (!dims) throw std::bad_alloc();
      dims->size = static_cast<int>(s.size());
      std::copy(s.begin(), s.end(), dims->data);
      // ResizeTensor takes ownership of dims and frees it with free().
      if (ctx->ResizeTensor(ctx, &x, dims) != kTfLiteOk)
        throw Error("ResizeTensor failed for tensor " + std::to_string(t));
    }
  }
  op_profiles_.assign(ops_.size(), {});
  for (size_t i = 0; i < ops_.size(); ++i) {
    std::vector<Shape> in_shapes;
    std::vector<cl_mem> in, out;
    OpProfile& prof = op_profiles_[i];
    prof.bytes = ops_[i]->WeightBytes();
    for (int t : ops_[i]->inputs()) {
      prof.shape += (prof.shape.empty() ? "" : "x") + ShapeString(values_.at(t).shape);
      prof.bytes += double(NumElements(values_.at(t).shape)) * octx.storage_bytes;
    }
    prof.shape += "->";
    for (size_t j = 0; j < out_shapes[i].size(); ++j) {
      prof.shape += ShapeString(out_shapes[i][j]);
      prof.bytes += double(NumElements(out_shapes[i][j])) * octx.storage_bytes;
    }
    for (int t : ops_[i]->inputs()) {
      in_shapes.push_back(values_.at(t).shape);
      in.push_back(Mem(t));
    }
    for (int t : ops_[i]->outputs()) out.push_back(Mem(t));
    ops_[i]->Prepare(octx, in_shapes, out_shapes[i], in, out);
    prof.flops = ops_[i]->Flops(in_shapes, out_shapes[i]);
    report.weight_bytes += static_cast<size_t>(ops_[i]->WeightBytes());
  }
  for (const auto& [t, v] : values_)
    if (v.kind == Kind::kConstant) report.weight_bytes += v.buffer.bytes();
  core_->SetMemoryReport(id_, report);
  planned_ = true;
}

TfLiteStatus PartitionKernel::Prepare(TfLiteContext* ctx) {
  std::lock_guard<std::mutex> lock(core_->queue_mutex());
  Plan(ctx);
  return kTfLiteOk;
}

TfLiteStatus PartitionKernel::Invoke(TfLiteContext* ctx) {
  std::lock_guard<std::mutex> lock(core_->queue_mutex());
  const auto t0 = std::chrono::steady_clock::now();
  Plan(ctx);  // no-op unless a dynamic input changed shape without a prepare
  const ClApi& cl = Cl();
  cl_command_queue q = core_->queue();
  if (core_->options().fail_at == "invoke")
    throw ClError("clEnqueueNDRangeKernel", CL_OUT_OF_RESOURCES, "injected failure (fail_at)");
  // With profiling on, every enqueue gets an event: -1 = upload, -2 = download,
  // otherwise the index of the op.
  const bool profiling = core_->options().profiling;
  std::vector<Event> events;
  std::vector<int> event_op;
  std::vector<int64_t> event_bytes;
  auto event_slot = [&](int op, int64_t bytes) -> cl_event* {
    if (!profiling) return nullptr;
    events.emplace_back();
    event_op.push_back(op);
    event_bytes.push_back(bytes);
    return &last_event_;
  };
  auto keep_event = [&]() {
    if (profiling) events.back() = Event(std::exchange(last_event_, nullptr));
  };
  for (int t : uploads_) {
    const TfLiteTensor& x = ctx->tensors[t];
    const Value& v = values_[t];
    const size_t bytes = static_cast<size_t>(NumElements(v.shape)) * sizeof(float);
    if (!bytes) continue;
    if (!x.data.raw || x.bytes < bytes) throw Error("partition input has no data");
    const bool staged = static_cast<bool>(v.staging);
    CheckCl(cl.clEnqueueWriteBuffer(q, staged ? v.staging.get() : Mem(t), CL_FALSE, 0,
                                    bytes, x.data.raw_const, 0, nullptr, event_slot(-1, bytes)),
            "clEnqueueWriteBuffer");
    keep_event();
    if (staged) {
      CheckCl(cl.clEnqueueNDRangeKernel(q, v.convert.kernel.get(), 1, nullptr, v.convert.global,
                                        nullptr, 0, nullptr, event_slot(-1, 0)),
              "clEnqueueNDRangeKernel(to_storage)");
      keep_event();
    }
  }
  int kernels = 0;
  for (size_t i = 0; i < ops_.size(); ++i) {
    const Op& op = *ops_[i];
    bool empty = false;
    for (int t : op.outputs()) empty = empty || NumElements(values_[t].shape) == 0;
    if (empty) continue;
    for (const Launch& l : op.launches()) {
      const size_t* local = l.local[0] ? l.local : nullptr;
      CheckCl(cl.clEnqueueNDRangeKernel(q, l.kernel.get(), l.dims, nullptr, l.global, local, 0,
                                        nullptr, event_slot(static_cast<int>(i), 0)),
              "clEnqueueNDRangeKernel");
      keep_event();
      ++kernels;
    }
  }
  for (int t : downloads_) {
    TfLiteTensor& x = ctx->tensors[t];
    const Value& v = values_[t];
    const size_t bytes = static_cast<size_t>(NumElements(v.shape)) * sizeof(float);
    if (!bytes) continue;
    if (!x.data.raw || x.bytes < bytes) throw Error("partition output has no buffer");
    if (v.kind == Kind::kConstant) {
      std::memcpy(x.data.raw, v.constant.data(), bytes);
      continue;
    }
    const bool staged = static_cast<bool>(v.staging);
    if (staged) {
      CheckCl(cl.clEnqueueNDRangeKernel(q, v.convert.kernel.get(), 1, nullptr, v.convert.global,
                                        nullptr, 0, nullptr, event_slot(-2, 0)),
              "clEnqueueNDRangeKernel(from_storage)");
      keep_event();
    }
    CheckCl(cl.clEnqueueReadBuffer(q, staged ? v.staging.get() : Mem(t), CL_FALSE, 0,
                                   bytes, x.data.raw, 0, nullptr, event_slot(-2, bytes)),
            "clEnqueueReadBuffer");
    keep_event();
  }
  CheckCl(cl.clFinish(q), "clFinish");
  if (core_->options().fail_at == "read")
    throw ClError("clEnqueueReadBuffer", CL_OUT_OF_RESOURCES, "injected (fail_at=read)");
  core_->CountInvoke();
  if (core_->options().capture_tensors) CaptureValues();
  if (profiling) {
    const double wall =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    RecordProfile(events, event_op, event_bytes, wall, kernels);
  }
  return kTfLiteOk;
}

void PartitionKernel::RecordProfile(const std::vector<Event>& events,
                                    const std::vector<int>& event_op,
                                    const std::vector<int64_t>& event_bytes, double wall_ns,
                                    int kernels) {
  Profiler& prof = core_->profiler();
  std::map<int, size_t> launch_index;  // per op: which of its launches this event is
  for (size_t e = 0; e < events.size(); ++e) {
    cl_ulong start = 0, end = 0;
    Cl().clGetEventProfilingInfo(events[e].get(), CL_PROFILING_COMMAND_START, sizeof start,
                                 &start, nullptr);
    Cl().clGetEventProfilingInfo(events[e].get(), CL_PROFILING_COMMAND_END, sizeof end, &end,
                                 nullptr);
    const int op = event_op[e];
    if (op < 0) {
      prof.AddTransfer(id_, op == -1, event_bytes[e], start, end);
      continue;
    }
    const Op& o = *ops_[op];
    const size_t li = launch_index[op]++;
    KernelRecord r;
    r.partition = id_;
    r.node = o.node_index();
    r.op = o.type_name();
    r.algorithm = o.algorithm();
    r.kernel = li < o.launches().size() ? o.launches()[li].name : "?";
    r.shape = op_profiles_[op].shape;
    // Work and traffic are attributed to the op's first launch only.
    r.flops = li == 0 ? op_profiles_[op].flops : 0;
    r.bytes = li == 0 ? op_profiles_[op].bytes : 0;
    prof.AddKernel(r, start, end);
  }
  prof.EndInvoke(id_, wall_ns, kernels);
}

void PartitionKernel::CaptureValues() {
  const size_t storage = core_->storage_bytes();
  for (const auto& [t, v] : values_) {
    if (v.kind == Kind::kConstant) continue;
    const size_t n = static_cast<size_t>(NumElements(v.shape));
    DelegateCore::Captured c{v.shape, std::vector<float>(n)};
    if (n) {
      std::vector<unsigned char> raw(n * storage);
      CheckCl(Cl().clEnqueueReadBuffer(core_->queue(), Mem(t), CL_TRUE, 0, raw.size(), raw.data(),
                                       0, nullptr, nullptr),
              "clEnqueueReadBuffer(capture)");
      if (storage == 2) {
        const auto* h = reinterpret_cast<const uint16_t*>(raw.data());
        for (size_t i = 0; i < n; ++i) c.data[i] = HalfToFloat(h[i]);
      } else {
        std::memcpy(c.data.data(), raw.data(), n * 4);
      }
    }
    core_->Capture(t, std::move(c));
  }
}

// A kernel whose init failed: it reports the reason at prepare (init cannot).
struct KernelHandle {
  std::unique_ptr<PartitionKernel> kernel;
  std::string init_error;
};

void* Init(TfLiteContext* ctx, const char* buffer, size_t) {
  auto* h = new KernelHandle;
  try {
    h->kernel = std::make_unique<PartitionKernel>(
        ctx, reinterpret_cast<const TfLiteDelegateParams*>(buffer));
  } catch (const std::exception& e) {
    h->init_error = e.what();
  }
  return h;
}

void Free(TfLiteContext*, void* buffer) { delete static_cast<KernelHandle*>(buffer); }

template <typename F>
TfLiteStatus Guard(TfLiteContext* ctx, TfLiteNode* node, const char* stage, F&& f) {
  auto* h = static_cast<KernelHandle*>(node->user_data);
  if (!h || !h->kernel) {
    ctx->ReportError(ctx, "clgpu_delegate: kernel init failed: %s",
                     h ? h->init_error.c_str() : "no kernel");
    return kTfLiteError;
  }
  try {
    return f(*h->kernel);
  } catch (const std::exception& e) {
    ctx->ReportError(ctx, "clgpu_delegate: %s failed: %s", stage, e.what());
    return kTfLiteError;
  }
}

TfLiteStatus PrepareKernel(TfLiteContext* ctx, TfLiteNode* node) {
  return Guard(ctx, node, "prepare", [&](PartitionKernel& k) { return k.Prepare(ctx); });
}

TfLiteStatus InvokeKernel(TfLiteContext* ctx, TfLiteNode* node) {
  return Guard(ctx, node, "invoke", [&](PartitionKernel& k) { return k.Invoke(ctx); });
}

}  // namespace

TfLiteRegistration PartitionKernelRegistration() {
  TfLiteRegistration r;
  std::memset(&r, 0, sizeof r);
  r.init = Init;
  r.free = Free;
  r.prepare = PrepareKernel;
  r.invoke = InvokeKernel;
  r.builtin_code = tfl::kDelegate;
  r.custom_name = "CLGPU_DELEGATE";
  r.version = 1;
  return r;
}

}  // namespace clgpu
