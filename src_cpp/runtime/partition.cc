#include "runtime/partition.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>

#include "cl/errors.h"
#include "common/error.h"
#include "common/half.h"
#include "runtime/memory_planner.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

Shape TensorShape(const TfLiteTensor& x) {
  return x.dims ? Shape(x.dims->data, x.dims->data + x.dims->size) : Shape{};
}

}  // namespace

size_t Partition::Value::float_bytes() const {
  return static_cast<size_t>(NumElements(shape)) * sizeof(float);
}

Partition::Partition(TfLiteContext* ctx, const TfLiteDelegateParams* params)
    : core_(DelegateCore::From(params->delegate)->shared()) {
  if (!core_) throw Error("the delegate was destroyed before its kernels were created");
  id_ = core_->NextPartitionId();
  zero_copy_ = core_->zero_copy();
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

Partition::~Partition() { core_->DropMemoryReport(id_); }

OpContext Partition::MakeOpContext() {
  OpContext c{core_->env(), core_->queue(), core_->options()};
  c.storage_defines = core_->storage_defines();
  c.storage_bytes = core_->storage_bytes();
  c.disk = core_->disk_cache();
  c.max_alloc = core_->max_alloc_bytes();
  return c;
}

cl_mem Partition::TransferMem(int t) const {
  const Value& v = values_.at(t);
  return v.transfer ? v.transfer.get() : Mem(t);
}

bool Partition::InputShapesChanged(TfLiteContext* ctx) {
  bool changed = !planned_;
  for (int t : uploads_) {
    const TfLiteTensor& x = ctx->tensors[t];
    if (x.type != kTfLiteFloat32)
      throw Error("partition input " + std::to_string(t) + " is not float32");
    Shape s = TensorShape(x);
    if (s != values_[t].shape) {
      values_[t].shape = std::move(s);
      changed = true;
    }
  }
  return changed;
}

void Partition::ReleaseLaunches() {
  for (auto& op : ops_) op->ClearLaunches();
  for (auto& [t, v] : values_) v.convert = Launch{};
}

void Partition::Plan(TfLiteContext* ctx) {
  ReleaseLaunches();  // before any buffer they reference is replaced
  OpContext octx = MakeOpContext();
  Environment& env = core_->env();
  report_ = MemoryReport{};
  for (auto& [t, v] : values_) {
    if (v.kind == Kind::kConstant && !v.buffer) v.buffer = UploadWeights(octx, v.constant);
    if (v.kind == Kind::kConstant) report_.weight_bytes += v.buffer.bytes();
  }
  out_shapes_.assign(ops_.size(), {});
  for (size_t i = 0; i < ops_.size(); ++i) {
    std::vector<Shape> in;
    for (int t : ops_[i]->inputs()) in.push_back(values_.at(t).shape);
    out_shapes_[i] = ops_[i]->InferShapes(in);
    for (size_t j = 0; j < out_shapes_[i].size(); ++j)
      values_[ops_[i]->outputs()[j]].shape = out_shapes_[i][j];
  }
  if (core_->options().fail_at == "alloc")
    throw ClError("clCreateBuffer", CL_MEM_OBJECT_ALLOCATION_FAILURE, "injected (fail_at=alloc)");

  // Lifetimes in op steps: inputs are written before step 0, outputs are read
  // after the last step; the planner lets disjoint lifetimes share memory.
  // Under zero-copy without fp16, boundary tensors live in TFLite's memory instead.
  const bool boundary_outside = zero_copy_ && !core_->half_storage();
  std::vector<int> planned;
  std::vector<TensorUsage> usage;
  std::map<int, size_t> index_of;
  const int end_step = static_cast<int>(ops_.size());
  for (auto& [t, v] : values_) {
    v.transfer.Release();
    v.host_ptr = nullptr;
    if (v.kind == Kind::kConstant) continue;
    if (boundary_outside && (v.kind == Kind::kInput || v.is_partition_output)) {
      v.buffer.Release();
      v.slot = -1;
      continue;
    }
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
  for (int t : planned) {
    values_[t].buffer.Release();
    values_[t].slot = -1;
  }
  arena_.Release();
  shared_.clear();
  const OffsetPlan plan = PlanOffsetsGreedyBySize(usage, env.device().base_addr_align_bytes);
  report_.naive_bytes = plan.naive_bytes;
  report_.lower_bound_bytes = plan.lower_bound_bytes;
  // NVIDIA's driver (580) crashed releasing sub-buffers that kernels had used once
  // those kernels were gone (any re-plan after an invoke), so there activations
  // share whole buffers (greedy by size over shared objects) instead of living at
  // offsets in one arena: a little more memory, no sub-buffers.
  const char* force = std::getenv("CLGPU_SUBBUFFERS");  // "0"/"1": tests of both paths
  const bool views =
      force && *force ? force[0] == '1' : env.device().vendor.find("NVIDIA") == std::string::npos;
  const MemoryPlan shared = views ? MemoryPlan{} : PlanSharedObjects(usage);
  const bool shared_fits =
      !views && std::all_of(shared.buffer_bytes.begin(), shared.buffer_bytes.end(),
                            [&](size_t b) { return b <= octx.max_alloc; });
  if (views && plan.arena_bytes <= octx.max_alloc) {
    arena_ = env.CreateBuffer(plan.arena_bytes);
    for (size_t i = 0; i < planned.size(); ++i)
      values_[planned[i]].buffer = env.CreateSubBuffer(arena_, plan.offsets[i], usage[i].bytes);
    report_.allocated_bytes = arena_.bytes();
    report_.buffers = 1;
  } else if (shared_fits) {
    for (size_t b : shared.buffer_bytes) {
      shared_.push_back(env.CreateBuffer(b));
      report_.allocated_bytes += b;
    }
    for (size_t i = 0; i < planned.size(); ++i) values_[planned[i]].slot = shared.assignment[i];
    report_.buffers = static_cast<int>(shared_.size());
  } else {
    // Sharing would exceed the device's largest allocation: give each tensor its
    // own buffer instead (every buffer stays allocatable).
    for (size_t i = 0; i < planned.size(); ++i) {
      if (usage[i].bytes > octx.max_alloc)
        throw Error("tensor " + std::to_string(planned[i]) + " needs " +
                    std::to_string(usage[i].bytes) +
                    " bytes, more than the device's largest allocation (" +
                    std::to_string(octx.max_alloc) + ")");
      values_[planned[i]].buffer = env.CreateBuffer(usage[i].bytes);
      report_.allocated_bytes += usage[i].bytes;
    }
    report_.buffers = static_cast<int>(planned.size());
  }
  if (core_->half_storage() && !zero_copy_) {
    for (int t : uploads_) values_[t].transfer = env.CreateBuffer(values_[t].float_bytes());
    for (int t : downloads_)
      if (values_[t].kind != Kind::kConstant)
        values_[t].transfer = env.CreateBuffer(values_[t].float_bytes());
  }
  for (const auto& [t, v] : values_) report_.staging_bytes += v.transfer.bytes();

  for (int t : downloads_) {
    TfLiteTensor& x = ctx->tensors[t];
    const Shape& s = values_[t].shape;
    if (TensorShape(x) == s) continue;
    auto* dims = static_cast<TfLiteIntArray*>(std::malloc(sizeof(int) * (1 + s.size())));
    if (!dims) throw std::bad_alloc();
    dims->size = static_cast<int>(s.size());
    std::copy(s.begin(), s.end(), dims->data);
    // ResizeTensor takes ownership of dims and frees it with free().
    if (ctx->ResizeTensor(ctx, &x, dims) != kTfLiteOk)
      throw Error("ResizeTensor failed for tensor " + std::to_string(t));
  }
  planned_ = true;
  bound_ = false;
}

bool Partition::OutputEmpty(size_t op) const {
  for (int t : ops_[op]->outputs())
    if (NumElements(values_.at(t).shape) == 0) return true;
  return false;
}

bool Partition::HostPointersChanged(TfLiteContext* ctx) const {
  if (!zero_copy_) return false;
  for (int t : uploads_)
    if (ctx->tensors[t].data.raw_const != values_.at(t).host_ptr) return true;
  for (int t : downloads_)
    if (values_.at(t).kind != Kind::kConstant &&
        ctx->tensors[t].data.raw_const != values_.at(t).host_ptr)
      return true;
  return false;
}

void Partition::Bind(TfLiteContext* ctx) {
  ReleaseLaunches();  // before any buffer they reference is replaced
  OpContext octx = MakeOpContext();
  Environment& env = core_->env();
  if (zero_copy_) {
    // Wrap TFLite's own tensor memory: on shared-memory devices the kernels then
    // read inputs and write outputs in place, with map/unmap instead of copies.
    auto wrap = [&](int t, cl_mem_flags flags) {
      Value& v = values_[t];
      const TfLiteTensor& x = ctx->tensors[t];
      const size_t bytes = v.float_bytes();
      if (!x.data.raw || x.bytes < bytes || bytes == 0) {
        // TFLite has not allocated the tensor yet (first prepare): bind a device
        // buffer for now, so programs are built at prepare; the first invoke sees
        // the real pointer and binds again.
        Buffer b = env.CreateBuffer(bytes);
        v.host_ptr = nullptr;
        if (core_->half_storage()) {
          v.transfer = std::move(b);
        } else {
          v.buffer = std::move(b);
        }
        return;
      }
      cl_int err = CL_SUCCESS;
      cl_mem mem =
          Cl().clCreateBuffer(env.context(), flags | CL_MEM_USE_HOST_PTR, bytes, x.data.raw, &err);
      if (err != CL_SUCCESS) throw ClError("clCreateBuffer(CL_MEM_USE_HOST_PTR)", err);
      Buffer b(mem, bytes);
      v.host_ptr = x.data.raw_const;
      if (core_->half_storage()) {
        v.transfer = std::move(b);
      } else {
        v.buffer = std::move(b);
      }
    };
    for (int t : uploads_) wrap(t, CL_MEM_READ_ONLY);
    for (int t : downloads_)
      if (values_[t].kind != Kind::kConstant) wrap(t, CL_MEM_WRITE_ONLY);
  }
  if (core_->half_storage()) {
    auto prog = octx.GetProgram("convert");
    auto convert = [&](int t, bool upload) {
      Value& v = values_[t];
      if (!v.transfer) return;
      const int n = static_cast<int>(NumElements(v.shape));
      v.convert.name = upload ? "to_storage" : "from_storage";
      v.convert.kernel = CreateKernel(*prog, v.convert.name);
      if (upload) {
        SetArgs(v.convert.kernel, v.transfer.get(), Mem(t), n);
      } else {
        SetArgs(v.convert.kernel, Mem(t), v.transfer.get(), n);
      }
      v.convert.global[0] = std::max(n, 1);
    };
    for (int t : uploads_) convert(t, true);
    for (int t : downloads_)
      if (values_[t].kind != Kind::kConstant) convert(t, false);
  }
  // Scratch: the largest request per slot over all ops, shared by them.
  std::vector<size_t> scratch_bytes;
  for (size_t i = 0; i < ops_.size(); ++i) {
    if (OutputEmpty(i)) continue;
    std::vector<Shape> in_shapes;
    for (int t : ops_[i]->inputs()) in_shapes.push_back(values_.at(t).shape);
    const std::vector<size_t> need = ops_[i]->ScratchBytes(octx, in_shapes);
    if (need.size() > scratch_bytes.size()) scratch_bytes.resize(need.size(), 0);
    for (size_t j = 0; j < need.size(); ++j) scratch_bytes[j] = std::max(scratch_bytes[j], need[j]);
  }
  scratch_.resize(std::max(scratch_.size(), scratch_bytes.size()));
  size_t scratch_total = 0;
  for (size_t j = 0; j < scratch_bytes.size(); ++j) {
    if (!scratch_[j] || scratch_[j].bytes() < scratch_bytes[j])
      scratch_[j] = env.CreateBuffer(scratch_bytes[j]);
    octx.scratch.push_back(scratch_[j].get());
    scratch_total += scratch_[j].bytes();
  }
  op_profiles_.assign(ops_.size(), {});
  size_t weight_bytes = 0;
  for (size_t i = 0; i < ops_.size(); ++i) {
    std::vector<Shape> in_shapes;
    std::vector<cl_mem> in, out;
    OpProfile& prof = op_profiles_[i];
    for (int t : ops_[i]->inputs()) {
      in_shapes.push_back(values_.at(t).shape);
      in.push_back(Mem(t));
      prof.shape += (prof.shape.empty() ? "" : "x") + ShapeString(values_.at(t).shape);
      prof.bytes += double(NumElements(values_.at(t).shape)) * octx.storage_bytes;
    }
    prof.shape += "->";
    for (size_t j = 0; j < out_shapes_[i].size(); ++j) {
      out.push_back(Mem(ops_[i]->outputs()[j]));
      prof.shape += ShapeString(out_shapes_[i][j]);
      prof.bytes += double(NumElements(out_shapes_[i][j])) * octx.storage_bytes;
    }
    // An op with an empty output (as the CPU produces for a too-small input) runs nothing.
    if (!OutputEmpty(i)) ops_[i]->Prepare(octx, in_shapes, out_shapes_[i], in, out);
    prof.flops = ops_[i]->Flops(in_shapes, out_shapes_[i]);
    prof.bytes += ops_[i]->WeightBytes();
    weight_bytes += static_cast<size_t>(ops_[i]->WeightBytes());
  }
  MemoryReport report = report_;
  report.weight_bytes += weight_bytes;
  report.scratch_bytes = scratch_total;
  core_->SetMemoryReport(id_, report);
  bound_ = true;
}

void Partition::Prepare(TfLiteContext* ctx) {
  if (InputShapesChanged(ctx)) Plan(ctx);
  if (!bound_ || HostPointersChanged(ctx)) Bind(ctx);
}

namespace {
// Waits for the queue when an invoke leaves by an exception: work already enqueued
// (non-blocking reads into TFLite's tensors, kernels) must not land after invoke
// has returned an error and the interpreter may have freed that memory.
struct DrainOnError {
  cl_command_queue queue;
  bool armed = true;
  ~DrainOnError() {
    if (armed) Cl().clFinish(queue);
  }
};
}  // namespace

void Partition::Invoke(TfLiteContext* ctx) {
  const auto t0 = std::chrono::steady_clock::now();
  DrainOnError drain{core_->queue()};
  if (InputShapesChanged(ctx)) Plan(ctx);  // a dynamic input resized without a prepare
  if (!bound_ || HostPointersChanged(ctx)) Bind(ctx);
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
  auto slot = [&](int op, int64_t bytes) -> cl_event* {
    if (!profiling) return nullptr;
    events.emplace_back();
    event_op.push_back(op);
    event_bytes.push_back(bytes);
    return &last_event_;
  };
  auto keep = [&]() {
    if (profiling) events.back() = Event(std::exchange(last_event_, nullptr));
  };
  auto run_convert = [&](const Value& v, int which) {
    if (!v.convert.kernel) return;
    CheckCl(cl.clEnqueueNDRangeKernel(q, v.convert.kernel.get(), 1, nullptr, v.convert.global,
                                      nullptr, 0, nullptr, slot(which, 0)),
            "clEnqueueNDRangeKernel(convert)");
    keep();
  };
  for (int t : uploads_) {
    const TfLiteTensor& x = ctx->tensors[t];
    const Value& v = values_[t];
    const size_t bytes = v.float_bytes();
    if (!bytes) continue;
    if (!x.data.raw || x.bytes < bytes) throw Error("partition input has no data");
    if (zero_copy_) {
      // The buffer wraps x.data: map + unmap makes the host's writes visible. The
      // map must invalidate: a plain CL_MAP_WRITE lets a driver with a device copy
      // (NVIDIA) first copy the old device contents over the new input.
      cl_int err = CL_SUCCESS;
      void* p = cl.clEnqueueMapBuffer(q, TransferMem(t), CL_FALSE, CL_MAP_WRITE_INVALIDATE_REGION,
                                      0, bytes, 0, nullptr, slot(-1, 0), &err);
      CheckCl(err, "clEnqueueMapBuffer");
      keep();
      CheckCl(cl.clEnqueueUnmapMemObject(q, TransferMem(t), p, 0, nullptr, nullptr),
              "clEnqueueUnmapMemObject");
    } else {
      CheckCl(cl.clEnqueueWriteBuffer(q, TransferMem(t), CL_FALSE, 0, bytes, x.data.raw_const, 0,
                                      nullptr, slot(-1, bytes)),
              "clEnqueueWriteBuffer");
      keep();
    }
    run_convert(v, -1);
  }
  int kernels = 0;
  for (size_t i = 0; i < ops_.size(); ++i) {
    const Op& op = *ops_[i];
    if (OutputEmpty(i)) continue;
    for (const Launch& l : op.launches()) {
      const size_t* local = l.local[0] ? l.local : nullptr;
      CheckCl(cl.clEnqueueNDRangeKernel(q, l.kernel.get(), l.dims, nullptr, l.global, local, 0,
                                        nullptr, slot(static_cast<int>(i), 0)),
              "clEnqueueNDRangeKernel");
      keep();
      ++kernels;
      // Some drivers (NVIDIA's) hold enqueued work until a flush: submit early so
      // the device runs while the host is still enqueueing, then in batches.
      if (kernels == 2 || kernels % 16 == 0) CheckCl(cl.clFlush(q), "clFlush");
    }
  }
  std::vector<std::pair<cl_mem, void*>> mapped;
  for (int t : downloads_) {
    TfLiteTensor& x = ctx->tensors[t];
    const Value& v = values_[t];
    const size_t bytes = v.float_bytes();
    if (!bytes) continue;
    if (!x.data.raw || x.bytes < bytes) throw Error("partition output has no buffer");
    if (v.kind == Kind::kConstant) {
      std::memcpy(x.data.raw, v.constant.data(), bytes);
      continue;
    }
    run_convert(v, -2);
    if (zero_copy_) {
      cl_int err = CL_SUCCESS;
      void* p = cl.clEnqueueMapBuffer(q, TransferMem(t), CL_FALSE, CL_MAP_READ, 0, bytes, 0,
                                      nullptr, slot(-2, 0), &err);
      if (err != CL_SUCCESS) {
        // Leave no output mapped behind the error.
        for (const auto& [mem, ptr] : mapped)
          cl.clEnqueueUnmapMemObject(q, mem, ptr, 0, nullptr, nullptr);
        cl.clFinish(q);
      }
      CheckCl(err, "clEnqueueMapBuffer");
      keep();
      mapped.emplace_back(TransferMem(t), p);
    } else {
      CheckCl(cl.clEnqueueReadBuffer(q, TransferMem(t), CL_FALSE, 0, bytes, x.data.raw, 0, nullptr,
                                     slot(-2, bytes)),
              "clEnqueueReadBuffer");
      keep();
    }
  }
  // Mapped outputs are unmapped after the sync: the data is in TFLite's memory.
  // Every one is unmapped even if one fails, and the first failure is reported.
  cl_int unmap_err = CL_SUCCESS;
  for (const auto& [mem, p] : mapped) {
    const cl_int e = cl.clEnqueueUnmapMemObject(q, mem, p, 0, nullptr, nullptr);
    if (unmap_err == CL_SUCCESS) unmap_err = e;
  }
  mapped.clear();
  CheckCl(unmap_err, "clEnqueueUnmapMemObject");
  CheckCl(cl.clFinish(q), "clFinish");
  drain.armed = false;
  if (core_->options().fail_at == "read")
    throw ClError("clEnqueueReadBuffer", CL_OUT_OF_RESOURCES, "injected (fail_at=read)");
  core_->CountInvoke();
  if (core_->options().capture_tensors) CaptureValues();
  if (profiling) {
    const double wall =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    RecordProfile(events, event_op, event_bytes, wall, kernels);
  }
}

void Partition::CaptureValues() {
  const size_t storage = core_->storage_bytes();
  for (const auto& [t, v] : values_) {
    if (v.kind == Kind::kConstant || !Mem(t)) continue;
    const size_t n = static_cast<size_t>(NumElements(v.shape));
    // Zero-copy boundary tensors are TFLite's float32 memory itself.
    const size_t elem = v.host_ptr && !core_->half_storage() ? 4 : storage;
    DelegateCore::Captured c{v.shape, std::vector<float>(n)};
    if (n) {
      std::vector<unsigned char> raw(n * elem);
      CheckCl(Cl().clEnqueueReadBuffer(core_->queue(), Mem(t), CL_TRUE, 0, raw.size(), raw.data(),
                                       0, nullptr, nullptr),
              "clEnqueueReadBuffer(capture)");
      if (elem == 2) {
        const auto* h = reinterpret_cast<const uint16_t*>(raw.data());
        for (size_t i = 0; i < n; ++i) c.data[i] = HalfToFloat(h[i]);
      } else {
        std::memcpy(c.data.data(), raw.data(), n * 4);
      }
    }
    core_->Capture(t, std::move(c));
  }
}

void Partition::RecordProfile(const std::vector<Event>& events, const std::vector<int>& event_op,
                              const std::vector<int64_t>& event_bytes, double wall_ns,
                              int kernels) {
  Profiler& prof = core_->profiler();
  std::map<int, size_t> launch_index;  // per op: which of its launches this event is
  for (size_t e = 0; e < events.size(); ++e) {
    cl_ulong start = 0, end = 0;
    Cl().clGetEventProfilingInfo(events[e].get(), CL_PROFILING_COMMAND_START, sizeof start, &start,
                                 nullptr);
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

}  // namespace clgpu
