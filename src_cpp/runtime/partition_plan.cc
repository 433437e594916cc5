// Planning a partition (runtime/partition.h): shapes, the memory plan, chunks and output
// resizes, whenever its input shapes change.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>

#include "cl/errors.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"
#include "graph/validate.h"
#include "runtime/memory_planner.h"
#include "runtime/partition.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

enum class ArenaKind { kSubBuffers, kSvm, kShared };

// Where activations live: views into one arena (sub-buffers; on NVIDIA, whose
// driver crashes releasing used sub-buffers, SVM views), else shared whole
// buffers. CLGPU_ARENA=subbuffers|svm|shared picks one on any device (tests);
// "svm" without SVM support falls back to shared buffers.
ArenaKind PickArena(const DeviceInfo& d) {
  const std::string f = GetEnv("CLGPU_ARENA").value_or("");
  if (f == "subbuffers") return ArenaKind::kSubBuffers;
  if (f == "svm") return ArenaKind::kSvm;
  if (f == "shared") return ArenaKind::kShared;
  if (!f.empty()) throw Error("CLGPU_ARENA must be subbuffers, svm or shared, not '" + f + "'");
  if (!d.profile.shared_arena) return ArenaKind::kSubBuffers;
  return d.svm_coarse ? ArenaKind::kSvm : ArenaKind::kShared;
}

}  // namespace

void Partition::Plan(TfLiteContext* ctx) {
  PlanShapes();
  PlanDevice();
  ResizeOutputs(ctx);
}

// The ops read their own inputs and outputs again until the new attachments are in place.
void Partition::FreshAttachments() {
  for (auto& op : ops_) op->Attach(nullptr);
  attachments_.clear();
  for (const auto& op : ops_) attachments_.push_back(op->NewAttachments());
  for (size_t i = 0; i < ops_.size(); ++i) ops_[i]->Attach(&attachments_[i]);
  absorbed_.assign(ops_.size(), false);
  folded_into_.assign(ops_.size(), -1);
}

// Every value's shape from the partition's input shapes; what ran the old ones is dropped.
void Partition::PlanShapes() {
  ReleaseLaunches();  // before any buffer they reference is replaced
  FreshAttachments();
  for (auto& [t, v] : values_) v.elided = false, v.alias = -1;
  for (int t : uploads_)
    if (auto why = CheckElementCount(values_.at(t).shape, "partition input " + std::to_string(t));
        !why.empty())
      throw Error(why);
  out_shapes_.assign(ops_.size(), {});
  for (size_t i = 0; i < ops_.size(); ++i) {
    std::vector<Shape> in;
    for (int t : ops_[i]->inputs()) in.push_back(values_.at(t).shape);
    // Shapes read but not data: this partition's values', else TFLite's tensor's (an input of
    // the partition that only a folded SHAPE reads).
    for (int t : ops_[i]->ShapeInputs()) {
      const auto v = values_.find(t);
      in.push_back(v != values_.end() ? v->second.shape : shape_reads_.at(t));
    }
    out_shapes_[i] = ops_[i]->InferShapes(in);
    for (size_t j = 0; j < out_shapes_[i].size(); ++j) {
      // Before anything is sized from it (a resize_tensor_input can make any shape).
      const std::string why = CheckElementCount(
          out_shapes_[i][j], std::string(ops_[i]->type_name()) + " node " +
                                 std::to_string(ops_[i]->node_index()) + " output");
      if (!why.empty()) throw Error(why);
      values_[ops_[i]->outputs()[j]].shape = out_shapes_[i][j];
    }
  }
  planned_ = true;
  device_planned_ = bound_ = false;
}

// The folds, chunks and memory plan of the shapes PlanShapes left: device buffers only, no
// TFLite call (it may run on the warm-up's setup thread).
void Partition::PlanDevice() {
  DebugTimer timer("partition " + std::to_string(id_) + ": memory planned");
  host_->CountPlan();
  OpContext octx = MakeOpContext();
  report_ = MemoryReport{};
  AssignStorage();
  UploadReadConstants(octx);
  ApplyFolds(octx);
  const size_t chunk_bytes = std::min<size_t>(
      octx.max_alloc, std::max<size_t>(64u << 20, host_->env().device().global_mem_bytes / 16));
  const std::vector<size_t> staging_bytes = PlanPiecesAndChunks(octx, chunk_bytes);
  AllocateActivations(octx.max_alloc, staging_bytes);
  PlanBoundaryTransfers(octx.max_alloc, chunk_bytes);
  if (!PlanConversions(octx)) {
    // Precision auto met a value in pieces or an op in chunks: the partition runs in float32.
    RunInFloat32({});
    PlanShapes();
    return PlanDevice();
  }
  device_planned_ = true;
  bound_ = false;
}

// Constants that ops read as activations (an ADD operand): uploaded once, in pieces when
// larger than one buffer. Weights are the ops' own.
void Partition::UploadReadConstants(OpContext& octx) {
  const size_t max_alloc = octx.max_alloc;
  std::set<int> read;
  for (const auto& op : ops_) read.insert(op->inputs().begin(), op->inputs().end());
  for (auto& entry : values_) {
    // Named, not a structured binding: C++17 lambdas cannot capture bindings.
    const int t = entry.first;
    Value& v = entry.second;
    if (v.kind != Kind::kConstant || !read.count(t)) continue;
    const size_t eb = ElemBytes(t);
    // Elements [b, e) in the value's device storage.
    auto upload = [&](size_t b, size_t e) {
      if (v.type == ValueType::kFloat) {
        OpContext c = half_ && !v.half ? octx.WithFloat32Storage() : octx;
        return UploadWeights(c, std::vector<float>(v.constant.begin() + b, v.constant.begin() + e));
      }
      return UploadBytes(octx, v.constant_bytes.data() + b * eb, (e - b) * eb);
    };
    if (!v.buffer && !v.split()) {
      const size_t n = static_cast<size_t>(NumElements(v.shape));
      if (n * eb <= max_alloc) {
        v.buffer = upload(0, n);
      } else {
        std::string why;
        v.pieces = PlanPieces(v.shape, max_alloc / eb, &why);
        if (v.pieces.empty()) throw Error("constant tensor " + std::to_string(t) + ": " + why);
        for (const Piece& p : v.pieces) v.piece_buffers.push_back(upload(p.begin, p.end));
      }
    }
    report_.weight_bytes += v.buffer.bytes();
    for (const Buffer& b : v.piece_buffers) report_.weight_bytes += b.bytes();
  }
}

// Activations larger than one buffer become pieces (allocated later, outside the memory plan);
// the ops touching them, or too large themselves, run in chunks of at most chunk_bytes. The
// staging bytes the chunks need, per slot (a chunk's inputs, then its output).
std::vector<size_t> Partition::PlanPiecesAndChunks(const OpContext& octx, size_t chunk_bytes) {
  const size_t max_alloc = octx.max_alloc;
  for (auto& [t, v] : values_) {
    if (v.kind == Kind::kConstant) continue;
    v.piece_buffers.clear();
    v.pieces.clear();
    const size_t eb = ElemBytes(t);
    if (v.elided || size_t(NumElements(v.shape)) * eb <= max_alloc) continue;
    std::string why;
    v.pieces = PlanPieces(v.shape, max_alloc / eb, &why);
    if (v.pieces.empty())
      throw Error("tensor " + std::to_string(t) + " " + ShapeString(v.shape) + ": " + why);
  }
  AliasFlatCopies();
  runs_.clear();
  runs_.resize(ops_.size());
  std::vector<size_t> staging_bytes;  // per slot: inputs of a chunk, then its output
  for (size_t i = 0; i < ops_.size(); ++i) {
    if (absorbed_[i]) continue;
    std::vector<Shape> in;
    for (int t : ops_[i]->inputs()) in.push_back(values_.at(t).shape);
    OpRun& run = runs_[i];
    const std::string why =
        PlanOpChunks(OpCtx(octx, i), *ops_[i], in, out_shapes_[i], chunk_bytes, &run.plan);
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
        staging_bytes[j] = std::max(staging_bytes[j], size_t(BoxElements(run.plan.in[c][j])) *
                                                          ElemBytes(ops_[i]->inputs()[j]));
      staging_bytes[in.size()] =
          std::max(staging_bytes[in.size()],
                   size_t(BoxElements(run.plan.out[c])) * ElemBytes(ops_[i]->outputs()[0]));
    }
  }

  return staging_bytes;
}

// Lifetimes in op steps of the activations the memory plan places (*planned, in order): inputs
// are written before step 0, outputs are read after the last step; the planner lets disjoint
// lifetimes share memory. Under zero-copy, boundary tensors stored as TFLite holds them live in
// its memory instead.
std::vector<TensorUsage> Partition::PlanLifetimes(std::vector<int>* planned_out) {
  std::vector<int>& planned = *planned_out;
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
    if (v.elided || v.alias >= 0 || !v.pieces.empty() ||
        (zero_copy_ && !Converted(v) && (v.kind == Kind::kInput || v.is_partition_output))) {
      v.buffer.Release();
      v.slot = -1;
      continue;
    }
    TensorUsage u;
    u.bytes = std::max<size_t>(static_cast<size_t>(NumElements(v.shape)) * ElemBytes(t), 4);
    u.first = v.kind == Kind::kInput ? 0 : end_step;
    u.last = v.is_partition_output ? end_step : 0;
    index_of[t] = usage.size();
    planned.push_back(t);
    usage.push_back(u);
  }
  for (int i = 0; i < end_step; ++i) {
    if (absorbed_[i]) continue;
    for (int u : ops_[i]->inputs())
      if (const int t = Root(u); index_of.count(t))
        usage[index_of[t]].last = std::max(usage[index_of[t]].last, i);
    for (int u : ops_[i]->outputs())
      if (const int t = Root(u); index_of.count(t))
        usage[index_of[t]].first = std::min(usage[index_of[t]].first, i);
  }
  for (TensorUsage& u : usage) u.last = std::max(u.last, u.first);
  if (host_->settings().capture_tensors) {
    // Every activation must survive to the end of the invoke to be read back.
    for (TensorUsage& u : usage) u.first = 0, u.last = end_step;
  }
  return usage;
}

// The activations' memory: lifetimes, then one arena (or shared or own buffers), the pieces'
// buffers and the chunks' staging.
void Partition::AllocateActivations(size_t max_alloc, const std::vector<size_t>& staging_bytes) {
  Environment& env = host_->env();
  std::vector<int> planned;
  const std::vector<TensorUsage> usage = PlanLifetimes(&planned);
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
    arena_ = kind == ArenaKind::kSvm ? env.CreateSvmArena(plan.arena_bytes, host_->queue())
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
      v.piece_buffers.push_back(env.CreateBuffer((p.end - p.begin) * ElemBytes(t)));
      report_.split_bytes += v.piece_buffers.back().bytes();
    }
    ++report_.split_tensors;
    report_.split_pieces += static_cast<int>(v.pieces.size());
  }
  for (size_t b : staging_bytes) {
    staging_.push_back(env.CreateBuffer(b));
    report_.chunk_staging_bytes += staging_.back().bytes();
  }
}

void Partition::PlanBoundaryTransfers(size_t max_alloc, size_t chunk_bytes) {
  Environment& env = host_->env();
  // Boundary transfers. A split value goes a piece at a time; a float value under fp16
  // storage through a float32 staging buffer (a range at a time), also one whose
  // float32 copy alone would exceed one buffer. Zero-copy wraps only the others.
  const size_t stage_elems = std::max<size_t>(std::min(chunk_bytes, max_alloc) / sizeof(float), 1);
  size_t stage_need = 0;
  std::set<int> wrapped;  // a tensor both read and written by the partition counts once
  auto boundary = [&](int t) {
    Value& v = values_[t];
    if (v.kind == Kind::kConstant) return;
    v.ranged = v.split() || (Converted(v) && v.host_bytes() > max_alloc);
    if (v.ranged) {
      PlanTransferRanges(v, Converted(v) ? stage_elems : SIZE_MAX);
      if (Converted(v))
        for (const Value::Range& r : v.ranges) stage_need = std::max(stage_need, r.end - r.begin);
    } else if (zero_copy_) {
      if (wrapped.insert(t).second) report_.host_wrapped_bytes += v.host_bytes();
    } else if (Converted(v) && !v.transfer) {
      v.transfer = env.CreateBuffer(v.host_bytes());
    }
  };
  for (int t : uploads_) boundary(t);
  for (int t : downloads_) boundary(t);
  if (stage_need) transfer_staging_ = env.CreateBuffer(stage_need * sizeof(float));
  for (const auto& [t, v] : values_) report_.staging_bytes += v.transfer.bytes();
  report_.staging_bytes += transfer_staging_.bytes();
}

// TFLite's output tensors take the planned shapes.
void Partition::ResizeOutputs(TfLiteContext* ctx) {
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
}

}  // namespace clgpu
