#include "runtime/partition.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>

#include "cl/errors.h"
#include "common/error.h"
#include "ops/fusion.h"
#include "runtime/memory_planner.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

Shape TensorShape(const TfLiteTensor& x) {
  return x.dims ? Shape(x.dims->data, x.dims->data + x.dims->size) : Shape{};
}

enum class ArenaKind { kSubBuffers, kSvm, kShared };

// Where activations live: views into one arena (sub-buffers; on NVIDIA, whose
// driver crashes releasing used sub-buffers, SVM views), else shared whole
// buffers. CLGPU_ARENA=subbuffers|svm|shared picks one on any device (tests);
// "svm" without SVM support falls back to shared buffers.
ArenaKind PickArena(const DeviceInfo& d) {
  const char* force = std::getenv("CLGPU_ARENA");
  const std::string f = force ? force : "";
  if (f == "subbuffers") return ArenaKind::kSubBuffers;
  if (f == "svm") return ArenaKind::kSvm;
  if (f == "shared") return ArenaKind::kShared;
  if (!f.empty()) throw Error("CLGPU_ARENA must be subbuffers, svm or shared, not '" + f + "'");
  if (!d.nvidia()) return ArenaKind::kSubBuffers;
  return d.svm_coarse ? ArenaKind::kSvm : ArenaKind::kShared;
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
  std::vector<NodeInfo> op_nodes;  // per op, for FindResidualFusions
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
    op_nodes.push_back(node);
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
  // Which ADDs may fold into a conv; each plan decides with its shapes (FuseResiduals).
  fusions_ = FindResidualFusions(*graph, op_nodes, outputs);
  core_->CountKernelCreated();
}

Partition::~Partition() {
  ReleaseLaunches();  // kernels go before the buffers they use (see Op::ClearLaunches)
  core_->DropMemoryReport(id_);
}

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

Storage Partition::StorageOf(int t) const {
  const Value& v = values_.at(t);
  Storage s;
  if (v.split()) {
    for (const Buffer& b : v.piece_buffers) s.mems.push_back(b.get());
    s.pieces = v.pieces;
  } else if (v.arena_offset != SIZE_MAX) {
    s.mems = {arena_.get()};
    s.pieces = {Piece{0, static_cast<size_t>(NumElements(v.shape))}};
    s.offsets = {v.arena_offset};
  } else {
    s.mems = {Mem(t)};
    s.pieces = {Piece{0, static_cast<size_t>(NumElements(v.shape))}};
  }
  return s;
}

// Ranges of at most `stage_elems` elements (fp16: what transfer_staging_ holds),
// none crossing a piece.
void Partition::PlanTransferRanges(Value& v, size_t stage_elems) {
  v.ranges.clear();
  const std::vector<Piece> pieces =
      v.split() ? v.pieces : std::vector<Piece>{Piece{0, size_t(NumElements(v.shape))}};
  for (size_t p = 0; p < pieces.size(); ++p) {
    for (size_t b = pieces[p].begin; b < pieces[p].end;) {
      Value::Range r;
      r.piece = p;
      r.begin = b;
      r.end = b + std::min(stage_elems, pieces[p].end - b);
      b = r.end;
      v.ranges.push_back(std::move(r));
    }
  }
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
  for (OpRun& r : runs_) {
    r.steps.clear();
    r.chunks.clear();
  }
  for (auto& [t, v] : values_) {
    v.convert = Launch{};
    for (Value::Range& r : v.ranges) r.convert = Launch{};
  }
}

// Folds each eligible ADD into its conv for the shapes of this plan (out_shapes_ are those of
// the ops unfused), or leaves both as they are: when fusion is off, the operands' shapes differ
// now (a resize made the ADD broadcast) or the conv cannot take a residual.
void Partition::FuseResiduals(const OpContext& octx) {
  const Options& o = core_->options();
  // capture_tensors reads every activation back, the conv's own output included.
  if (!o.fuse_add || o.capture_tensors) return;
  for (const ResidualFusion& f : fusions_) {
    Op& conv = *ops_[f.producer];
    const Op& add = *ops_[f.add];
    const int y = conv.outputs()[0], z = add.outputs()[0];
    const Shape& s = values_.at(y).shape;
    std::vector<Shape> in;
    for (int t : conv.inputs()) in.push_back(values_.at(t).shape);
    float lo = 0, hi = 0;
    if (!add.IsResidualAdd(&lo, &hi) || values_.at(f.residual).shape != s ||
        values_.at(z).shape != s || !conv.CanFuseResidual(octx, in))
      continue;
    conv.FuseResidual(f.residual, z, lo, hi);
    out_shapes_[f.producer] = {s};
    absorbed_[f.add] = true;
    values_.at(y).elided = true;
  }
}

void Partition::Plan(TfLiteContext* ctx) {
  core_->CountPlan();
  ReleaseLaunches();  // before any buffer they reference is replaced
  for (auto& op : ops_) op->UnfuseResidual();
  absorbed_.assign(ops_.size(), false);
  for (auto& [t, v] : values_) v.elided = false;
  OpContext octx = MakeOpContext();
  Environment& env = core_->env();
  const size_t eb = octx.storage_bytes, max_alloc = octx.max_alloc;
  report_ = MemoryReport{};
  // Constants that ops read as activations (an ADD operand): uploaded once, in
  // pieces when larger than one buffer. Weights are the ops' own.
  std::set<int> read;
  for (const auto& op : ops_) read.insert(op->inputs().begin(), op->inputs().end());
  for (auto& [t, v] : values_) {
    if (v.kind != Kind::kConstant || !read.count(t)) continue;
    if (!v.buffer && !v.split()) {
      if (v.constant.size() * eb <= max_alloc) {
        v.buffer = UploadWeights(octx, v.constant);
      } else {
        std::string why;
        v.pieces = PlanPieces(v.shape, max_alloc / eb, &why);
        if (v.pieces.empty()) throw Error("constant tensor " + std::to_string(t) + ": " + why);
        for (const Piece& p : v.pieces)
          v.piece_buffers.push_back(UploadWeights(
              octx, std::vector<float>(v.constant.begin() + p.begin, v.constant.begin() + p.end)));
      }
    }
    report_.weight_bytes += v.buffer.bytes();
    for (const Buffer& b : v.piece_buffers) report_.weight_bytes += b.bytes();
  }
  out_shapes_.assign(ops_.size(), {});
  for (size_t i = 0; i < ops_.size(); ++i) {
    std::vector<Shape> in;
    for (int t : ops_[i]->inputs()) in.push_back(values_.at(t).shape);
    out_shapes_[i] = ops_[i]->InferShapes(in);
    for (size_t j = 0; j < out_shapes_[i].size(); ++j)
      values_[ops_[i]->outputs()[j]].shape = out_shapes_[i][j];
  }
  FuseResiduals(octx);
  if (core_->options().fail_at == "alloc")
    throw ClError("clCreateBuffer", CL_MEM_OBJECT_ALLOCATION_FAILURE, "injected (fail_at=alloc)");

  // Activations larger than one buffer become pieces (allocated below, outside the
  // memory plan); the ops touching them, or too large themselves, run in chunks.
  for (auto& [t, v] : values_) {
    if (v.kind == Kind::kConstant) continue;
    v.piece_buffers.clear();
    v.pieces.clear();
    if (v.elided || size_t(NumElements(v.shape)) * eb <= max_alloc) continue;
    std::string why;
    v.pieces = PlanPieces(v.shape, max_alloc / eb, &why);
    if (v.pieces.empty())
      throw Error("tensor " + std::to_string(t) + " " + ShapeString(v.shape) + ": " + why);
  }
  runs_.clear();
  runs_.resize(ops_.size());
  const size_t chunk_bytes =
      std::min<size_t>(max_alloc, std::max<size_t>(64u << 20, env.device().global_mem_bytes / 16));
  std::vector<size_t> staging_bytes;  // per slot: inputs of a chunk, then its output
  for (size_t i = 0; i < ops_.size(); ++i) {
    if (absorbed_[i]) continue;
    std::vector<Shape> in;
    for (int t : ops_[i]->inputs()) in.push_back(values_.at(t).shape);
    OpRun& run = runs_[i];
    const std::string why =
        PlanOpChunks(octx, *ops_[i], in, out_shapes_[i], chunk_bytes, &run.plan);
    if (!why.empty())
      throw Error(std::string(ops_[i]->type_name()) + " node " +
                  std::to_string(ops_[i]->node_index()) + ": " + why);
    if (run.plan.empty()) continue;
    ++report_.chunked_ops;
    report_.chunks += static_cast<int>(run.plan.out.size());
    const size_t slots = in.size() + 1;
    if (staging_bytes.size() < slots) staging_bytes.resize(slots, 0);
    for (size_t c = 0; c < run.plan.out.size(); ++c) {
      for (size_t j = 0; j < in.size(); ++j)
        staging_bytes[j] = std::max(staging_bytes[j], size_t(BoxElements(run.plan.in[c][j])) * eb);
      staging_bytes[in.size()] =
          std::max(staging_bytes[in.size()], size_t(BoxElements(run.plan.out[c])) * eb);
    }
  }

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
    v.arena_offset = SIZE_MAX;
    v.ranged = false;
    v.ranges.clear();
    if (v.kind == Kind::kConstant) continue;
    if (v.elided || !v.pieces.empty() ||
        (boundary_outside && (v.kind == Kind::kInput || v.is_partition_output))) {
      v.buffer.Release();
      v.slot = -1;
      continue;
    }
    TensorUsage u;
    u.bytes = std::max<size_t>(static_cast<size_t>(NumElements(v.shape)) * eb, 4);
    u.first = v.kind == Kind::kInput ? 0 : end_step;
    u.last = v.is_partition_output ? end_step : 0;
    index_of[t] = usage.size();
    planned.push_back(t);
    usage.push_back(u);
  }
  for (int i = 0; i < end_step; ++i) {
    if (absorbed_[i]) continue;
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
  staging_.clear();
  transfer_staging_.Release();
  const OffsetPlan plan = PlanOffsetsGreedyBySize(usage, env.device().base_addr_align_bytes);
  report_.naive_bytes = plan.naive_bytes;
  report_.lower_bound_bytes = plan.lower_bound_bytes;
  // NVIDIA's driver (580) crashes releasing sub-buffers that kernels had used once
  // those kernels are gone (any re-plan after an invoke). There the arena is one
  // SVM allocation whose views are plain buffers at interior addresses; without
  // SVM, activations share whole buffers (shared objects, PlanSharedObjects).
  const ArenaKind kind = PickArena(env.device());
  if (kind != ArenaKind::kShared && plan.arena_bytes <= max_alloc) {
    arena_ = kind == ArenaKind::kSvm ? env.CreateSvmArena(plan.arena_bytes, core_->queue())
                                     : env.CreateBuffer(plan.arena_bytes);
  }
  const MemoryPlan shared = arena_ ? MemoryPlan{} : PlanSharedObjects(usage);
  const bool shared_fits =
      !arena_ && std::all_of(shared.buffer_bytes.begin(), shared.buffer_bytes.end(),
                             [&](size_t b) { return b <= max_alloc; });
  if (arena_) {
    for (size_t i = 0; i < planned.size(); ++i) {
      values_[planned[i]].buffer = env.CreateSubBuffer(arena_, plan.offsets[i], usage[i].bytes);
      values_[planned[i]].arena_offset = plan.offsets[i];
    }
    report_.allocated_bytes = arena_.bytes();
    report_.buffers = 1;
    report_.arena = arena_.svm() ? "svm" : "sub-buffers";
  } else if (shared_fits) {
    for (size_t b : shared.buffer_bytes) {
      shared_.push_back(env.CreateBuffer(b));
      report_.allocated_bytes += b;
    }
    for (size_t i = 0; i < planned.size(); ++i) values_[planned[i]].slot = shared.assignment[i];
    report_.buffers = static_cast<int>(shared_.size());
    report_.arena = "shared";
  } else {
    // Sharing would exceed the device's largest allocation: give each tensor its
    // own buffer instead (every buffer stays allocatable).
    for (size_t i = 0; i < planned.size(); ++i) {
      values_[planned[i]].buffer = env.CreateBuffer(usage[i].bytes);
      report_.allocated_bytes += usage[i].bytes;
    }
    report_.buffers = static_cast<int>(planned.size());
    report_.arena = "own";
  }
  for (auto& [t, v] : values_) {
    if (v.kind == Kind::kConstant || v.pieces.empty()) continue;
    for (const Piece& p : v.pieces) {
      v.piece_buffers.push_back(env.CreateBuffer((p.end - p.begin) * eb));
      report_.split_bytes += v.piece_buffers.back().bytes();
    }
    ++report_.split_tensors;
    report_.split_pieces += static_cast<int>(v.pieces.size());
  }
  for (size_t b : staging_bytes) {
    staging_.push_back(env.CreateBuffer(b));
    report_.chunk_staging_bytes += staging_.back().bytes();
  }

  // Boundary transfers. A split value goes a piece at a time; under fp16 storage
  // through a float32 staging buffer (a range at a time), also for a value whose
  // float32 copy alone would exceed one buffer. Zero-copy wraps only the others.
  const size_t stage_elems = std::max<size_t>(std::min(chunk_bytes, max_alloc) / sizeof(float), 1);
  size_t stage_need = 0;
  std::set<int> wrapped;  // a tensor both read and written by the partition counts once
  auto boundary = [&](int t) {
    Value& v = values_[t];
    if (v.kind == Kind::kConstant) return;
    v.ranged = v.split() || (core_->half_storage() && v.float_bytes() > max_alloc);
    if (v.ranged) {
      PlanTransferRanges(v, core_->half_storage() ? stage_elems : SIZE_MAX);
      for (const Value::Range& r : v.ranges) stage_need = std::max(stage_need, r.end - r.begin);
    } else if (zero_copy_) {
      if (wrapped.insert(t).second) report_.host_wrapped_bytes += v.float_bytes();
    } else if (core_->half_storage() && !v.transfer) {
      v.transfer = env.CreateBuffer(v.float_bytes());
    }
  };
  for (int t : uploads_) boundary(t);
  for (int t : downloads_) boundary(t);
  if (core_->half_storage() && stage_need)
    transfer_staging_ = env.CreateBuffer(stage_need * sizeof(float));
  for (const auto& [t, v] : values_) report_.staging_bytes += v.transfer.bytes();
  report_.staging_bytes += transfer_staging_.bytes();

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

bool Partition::RunsNothing(size_t op) const {
  if (absorbed_.at(op)) return true;
  for (int t : ops_[op]->outputs())
    if (NumElements(values_.at(t).shape) != 0) return false;
  return true;
}

bool Partition::HostPointersChanged(TfLiteContext* ctx) const {
  if (!zero_copy_) return false;
  // Empty tensors are never wrapped (nothing to share): whatever pointer TFLite gives
  // them must not re-bind every invoke.
  auto changed = [&](int t) {
    const Value& v = values_.at(t);
    return !v.ranged && v.float_bytes() != 0 && ctx->tensors[t].data.raw_const != v.host_ptr;
  };
  for (int t : uploads_)
    if (changed(t)) return true;
  for (int t : downloads_)
    if (values_.at(t).kind != Kind::kConstant && changed(t)) return true;
  return false;
}

void Partition::Bind(TfLiteContext* ctx) {
  core_->CountBind();
  ReleaseLaunches();  // before any buffer they reference is replaced
  OpContext octx = MakeOpContext();
  Environment& env = core_->env();
  if (zero_copy_) {
    // Wrap TFLite's own tensor memory: on shared-memory devices the kernels then
    // read inputs and write outputs in place, with map/unmap instead of copies.
    auto wrap = [&](int t, cl_mem_flags flags) {
      Value& v = values_[t];
      if (v.ranged) return;  // larger than one buffer: transferred a range at a time
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
      env.CountBufferCreated();
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
    auto make = [&](bool upload, cl_mem floats, cl_mem storage, size_t n, size_t offset) {
      Launch l;
      l.name = upload ? "to_storage" : "from_storage";
      l.kernel = CreateKernel(*prog, l.name);
      const cl_long off = static_cast<cl_long>(offset);
      if (upload) {
        SetArgs(l.kernel, floats, storage, static_cast<int>(n), off);
      } else {
        SetArgs(l.kernel, storage, floats, static_cast<int>(n), off);
      }
      l.global[0] = std::max<size_t>(n, 1);
      return l;
    };
    auto convert = [&](int t, bool upload) {
      Value& v = values_[t];
      if (v.ranged) {
        for (Value::Range& r : v.ranges) {
          cl_mem piece = v.split() ? v.piece_buffers[r.piece].get() : Mem(t);
          const size_t base = v.split() ? v.pieces[r.piece].begin : 0;
          r.convert = make(upload, transfer_staging_.get(), piece, r.end - r.begin, r.begin - base);
        }
        return;
      }
      if (!v.transfer) return;
      v.convert = make(upload, v.transfer.get(), Mem(t), size_t(NumElements(v.shape)), 0);
    };
    for (int t : uploads_) convert(t, true);
    for (int t : downloads_)
      if (values_[t].kind != Kind::kConstant) convert(t, false);
  }
  // An op in chunks: one sub-op per chunk, made before the scratch is sized.
  for (size_t i = 0; i < ops_.size(); ++i) {
    OpRun& run = runs_[i];
    if (run.plan.empty() || RunsNothing(i)) continue;
    std::vector<Shape> in_shapes;
    for (int t : ops_[i]->inputs()) in_shapes.push_back(values_.at(t).shape);
    for (const Box& box : run.plan.out) {
      run.chunks.push_back(ops_[i]->MakeChunk(in_shapes, box));
      if (!run.chunks.back())
        throw Error(std::string(ops_[i]->type_name()) + " cannot run in chunks");
    }
  }
  // Scratch: the largest request per slot over all ops (and chunks), shared by them.
  std::vector<size_t> scratch_bytes;
  auto need_scratch = [&](const Op& op, const std::vector<Shape>& in_shapes) {
    const std::vector<size_t> need = op.ScratchBytes(octx, in_shapes);
    if (need.size() > scratch_bytes.size()) scratch_bytes.resize(need.size(), 0);
    for (size_t j = 0; j < need.size(); ++j) scratch_bytes[j] = std::max(scratch_bytes[j], need[j]);
  };
  for (size_t i = 0; i < ops_.size(); ++i) {
    if (RunsNothing(i)) continue;
    const OpRun& run = runs_[i];
    if (run.plan.empty()) {
      std::vector<Shape> in_shapes;
      for (int t : ops_[i]->inputs()) in_shapes.push_back(values_.at(t).shape);
      need_scratch(*ops_[i], in_shapes);
      continue;
    }
    for (size_t c = 0; c < run.chunks.size(); ++c) {
      std::vector<Shape> in_shapes;
      for (const Box& b : run.plan.in[c]) in_shapes.push_back(b.size);
      need_scratch(*run.chunks[c], in_shapes);
    }
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
    // A folded ADD, or an op whose outputs are all empty (as the CPU produces for a too-small
    // input), runs nothing.
    if (!RunsNothing(i)) {
      if (ops_[i]->IsFlatCopy()) {
        // Same elements, same order: one copy between the tensors' storage (more where
        // either is kept in pieces), both seen as flat.
        const Shape flat = {static_cast<int>(NumElements(in_shapes[0]))};
        std::vector<CopyCommand> copies;
        AppendBoxCopies(StorageOf(ops_[i]->inputs()[0]), flat, WholeBox(flat),
                        StorageOf(ops_[i]->outputs()[0]), flat, WholeBox(flat), octx.storage_bytes,
                        &copies);
        for (const CopyCommand& c : copies)
          runs_[i].steps.push_back(Step{nullptr, c, "copy", ops_[i].get()});
      } else if (runs_[i].plan.empty()) {
        ops_[i]->Prepare(octx, in_shapes, out_shapes_[i], in, out);
        for (const Launch& l : ops_[i]->launches())
          runs_[i].steps.push_back(Step{&l, {}, nullptr, ops_[i].get()});
      } else {
        BindChunks(octx, i);
      }
    }
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

// Per chunk: copies of the input boxes into staging (or the whole tensor as it is),
// the chunk's kernels, and the copy of its output box out of staging.
void Partition::BindChunks(OpContext& octx, size_t i) {
  OpRun& run = runs_[i];
  const Op& op = *ops_[i];
  const size_t eb = octx.storage_bytes, n_in = op.inputs().size();
  const int out_t = op.outputs()[0];
  const Shape& out_view = run.plan.spec.views.back();
  auto staging = [&](size_t slot, const Box& box, Shape* view) {
    *view = box.size;
    return Storage{{staging_.at(slot).get()}, {Piece{0, size_t(BoxElements(box))}}, {}};
  };
  for (size_t c = 0; c < run.chunks.size(); ++c) {
    Op& chunk = *run.chunks[c];
    std::vector<Shape> in_shapes;
    std::vector<cl_mem> in;
    std::vector<Step> copy_in;
    for (size_t j = 0; j < n_in; ++j) {
      const int t = op.inputs()[j];
      const Box& box = run.plan.in[c][j];
      const Shape& view = run.plan.spec.views[j];
      in_shapes.push_back(box.size);
      if (!values_.at(t).split() && SameBox(box, WholeBox(view))) {
        in.push_back(Mem(t));  // the whole tensor, as it is
        continue;
      }
      Shape sview;
      const Storage dst = staging(j, box, &sview);
      std::vector<CopyCommand> copies;
      AppendBoxCopies(StorageOf(t), view, box, dst, sview, WholeBox(sview), eb, &copies);
      for (const CopyCommand& cc : copies) copy_in.push_back(Step{nullptr, cc, "copy_in", &chunk});
      in.push_back(staging_.at(j).get());
    }
    const Box& obox = run.plan.out[c];
    const std::vector<Shape> chunk_out = chunk.InferShapes(in_shapes);
    if (chunk_out.size() != 1 || NumElements(chunk_out[0]) != BoxElements(obox))
      throw Error(std::string(op.type_name()) + " chunk " + ShapeString(obox.size) +
                  " does not compute its box");
    const bool direct = !values_.at(out_t).split() && SameBox(obox, WholeBox(out_view));
    cl_mem out = direct ? Mem(out_t) : staging_.at(n_in).get();
    chunk.Prepare(octx, in_shapes, chunk_out, in, {out});
    run.steps.insert(run.steps.end(), copy_in.begin(), copy_in.end());
    for (const Launch& l : chunk.launches()) run.steps.push_back(Step{&l, {}, nullptr, &chunk});
    if (direct) continue;
    Shape sview;
    const Storage src = staging(n_in, obox, &sview);
    std::vector<CopyCommand> copies;
    AppendBoxCopies(src, sview, WholeBox(sview), StorageOf(out_t), out_view, obox, eb, &copies);
    for (const CopyCommand& cc : copies) run.steps.push_back(Step{nullptr, cc, "copy_out", &chunk});
  }
}

void Partition::Prepare(TfLiteContext* ctx) {
  if (InputShapesChanged(ctx)) Plan(ctx);
  if (!bound_ || HostPointersChanged(ctx)) Bind(ctx);
}

}  // namespace clgpu
