// Binding a partition (runtime/partition.h): buffers, zero-copy wraps and kernel arguments,
// after a plan or when TFLite moved a tensor.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>

#include "cl/environment.h"
#include "cl/errors.h"
#include "common/error.h"
#include "common/log.h"
#include "runtime/build_threads.h"
#include "runtime/memory_planner.h"
#include "runtime/partition.h"
#include "tflite/builtin.h"

namespace clgpu {

namespace {
// The context an op prepares in: its programs built with its folded epilogue, if any.
OpContext WithEpilogue(const OpContext& octx, const Op& op) {
  OpContext c = octx;
  if (const std::string d = op.epilogue_defines(); !d.empty())
    c.storage_defines += (c.storage_defines.empty() ? "" : " ") + d;
  return c;
}
}  // namespace

bool Partition::HostPointersChanged(TfLiteContext* ctx) const {
  if (!zero_copy_) return false;
  // Empty tensors are never wrapped (nothing to share): whatever pointer TFLite gives
  // them must not re-bind every invoke.
  auto changed = [&](int t) {
    const Value& v = values_.at(t);
    return !v.ranged && v.host_bytes() != 0 && ctx->tensors[t].data.raw_const != v.host_ptr;
  };
  for (int t : uploads_)
    if (changed(t)) return true;
  for (int t : downloads_)
    if (values_.at(t).kind != Kind::kConstant && changed(t)) return true;
  return false;
}

void Partition::Bind(TfLiteContext* ctx) {
  DebugTimer timer("partition " + std::to_string(id_) + ": bound");
  host_->CountBind();
  ReleaseLaunches();  // before any buffer they reference is replaced
  OpContext octx = MakeOpContext();
  if (zero_copy_) WrapBoundaryTensors(ctx);
  if (half_) MakeTransferConversions(octx);
  MakeChunks();
  const size_t scratch_total = AllocateScratch(octx);
  PrepareOps(octx);
  BindConversions(octx);
  const size_t weight_bytes = ProfileOps();
  MemoryReport report = report_;
  report.weight_bytes += weight_bytes;
  report.scratch_bytes = scratch_total;
  host_->SetMemoryReport(id_, report);
  BindOverflowFlags();
  bool forms = false;
  for (const OpRun& run : runs_)
    for (const Step& st : run.steps)
      forms = forms || (st.launch && st.launch->form != LaunchForm::kBoth);
  forms_.Reset(forms, forms ? FormKey() : 0);
  bound_ = true;
}

uint64_t Partition::FormKey() const {
  const void* env = &host_->env();
  uint64_t h = HashBytes(&env, sizeof env);
  auto mix = [&h](const auto& v) { h = HashBytes(&v, sizeof v, h); };
  mix(half_);  // fp16 storage: the same kernels built otherwise
  for (const OpRun& run : runs_)
    for (const Step& st : run.steps) {
      if (st.launch) {
        const Launch& l = *st.launch;
        h = HashBytes(l.name.data(), l.name.size(), h);
        mix(l.dims);
        mix(l.global);
        mix(l.local);
        mix(l.form);
      } else {
        mix(st.copy.region);
        mix(st.copy.rect);
      }
    }
  return h ? h : 1;  // 0 means "shared with none"
}

// Zero-copy: wrap TFLite's own tensor memory, so that on shared-memory devices the kernels read
// inputs and write outputs in place, with map/unmap instead of copies.
void Partition::WrapBoundaryTensors(TfLiteContext* ctx) {
  Environment& env = host_->env();
  auto wrap = [&](int t, cl_mem_flags flags) {
    Value& v = values_[t];
    if (v.ranged) return;  // larger than one buffer: transferred a range at a time
    const TfLiteTensor* x = ctx ? &ctx->tensors[t] : nullptr;
    const size_t bytes = v.host_bytes();
    if (!x || !x->data.raw || x->bytes < bytes || bytes == 0) {
      // TFLite has not allocated the tensor yet (first prepare), or this is the warm-up's
      // setup thread: bind a device buffer for now, so programs are built; the first
      // invoke sees the real pointer and binds again.
      Buffer b = env.CreateBuffer(bytes);
      v.host_ptr = nullptr;
      if (Converted(v)) {
        v.transfer = std::move(b);
      } else {
        v.buffer = std::move(b);
      }
      return;
    }
    cl_int err = CL_SUCCESS;
    cl_mem mem =
        Cl().clCreateBuffer(env.context(), flags | CL_MEM_USE_HOST_PTR, bytes, x->data.raw, &err);
    if (err != CL_SUCCESS) throw ClError("clCreateBuffer(CL_MEM_USE_HOST_PTR)", err);
    env.CountBufferCreated();
    Buffer b(mem, bytes);
    v.host_ptr = x->data.raw_const;
    if (Converted(v)) {
      v.transfer = std::move(b);
    } else {
      v.buffer = std::move(b);
    }
  };
  for (int t : uploads_) wrap(t, CL_MEM_READ_ONLY);
  for (int t : downloads_)
    if (values_[t].kind != Kind::kConstant) wrap(t, CL_MEM_WRITE_ONLY);
}

// fp16 storage: the conversions of float boundary tensors to and from the storage type.
void Partition::MakeTransferConversions(OpContext& octx) {
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
    if (!Converted(v)) return;  // transferred as it is
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
void Partition::MakeChunks() {
  for (size_t i = 0; i < ops_.size(); ++i) {
    OpRun& run = runs_[i];
    if (run.plan.empty() || RunsNothing(i)) continue;
    std::vector<Shape> in_shapes;
    for (int t : ops_[i]->inputs()) in_shapes.push_back(values_.at(t).shape);
    for (const Box& box : run.plan.out) {
      const Chunker* chunker = ops_[i]->chunker();
      run.chunks.push_back(chunker ? chunker->MakeChunk(in_shapes, box) : nullptr);
      if (!run.chunks.back())
        throw Error(std::string(ops_[i]->type_name()) + " cannot run in chunks");
    }
  }
}

// Scratch: the largest request per slot over all ops (and chunks), shared by them; into
// octx.scratch. Its bytes.
size_t Partition::AllocateScratch(OpContext& octx) {
  Environment& env = host_->env();
  std::vector<size_t> scratch_bytes;
  auto need_scratch = [&](size_t i, const Op& op, const std::vector<Shape>& in_shapes) {
    const std::vector<size_t> need = op.ScratchBytes(OpCtx(octx, i), in_shapes);
    if (need.size() > scratch_bytes.size()) scratch_bytes.resize(need.size(), 0);
    for (size_t j = 0; j < need.size(); ++j) scratch_bytes[j] = std::max(scratch_bytes[j], need[j]);
  };
  for (size_t i = 0; i < ops_.size(); ++i) {
    if (RunsNothing(i)) continue;
    const OpRun& run = runs_[i];
    if (run.plan.empty()) {
      std::vector<Shape> in_shapes;
      for (int t : ops_[i]->inputs()) in_shapes.push_back(values_.at(t).shape);
      need_scratch(i, *ops_[i], in_shapes);
      continue;
    }
    for (size_t c = 0; c < run.chunks.size(); ++c) {
      std::vector<Shape> in_shapes;
      for (const Box& b : run.plan.in[c]) in_shapes.push_back(b.size);
      need_scratch(i, *run.chunks[c], in_shapes);
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
  return scratch_total;
}

// Each op's steps: a flat copy's copies here; kernels from the ops' Prepare on threads taking
// turns, so their programs build concurrently (runtime/build_threads.h).
void Partition::PrepareOps(OpContext& octx) {
  std::vector<std::function<void(std::mutex*)>> prepares;
  for (size_t i = 0; i < ops_.size(); ++i) {
    std::vector<Shape> in_shapes;
    for (int t : ops_[i]->inputs()) in_shapes.push_back(values_.at(t).shape);
    std::vector<size_t> first;
    runs_[i].flat = ops_[i]->FlatRanges(in_shapes, &first);
    // A folded ADD, or an op whose outputs are all empty (as the CPU produces for a too-small
    // input), runs nothing.
    if (RunsNothing(i)) continue;
    if (runs_[i].flat) {
      // Same elements, same order: one copy per output from its range of the input's storage
      // (more where either is kept in pieces), both seen as flat.
      const Shape flat = {static_cast<int>(NumElements(in_shapes[0]))};
      std::vector<CopyCommand> copies;
      for (size_t j = 0; j < out_shapes_[i].size(); ++j) {
        const Shape to = {static_cast<int>(NumElements(out_shapes_[i][j]))};
        AppendBoxCopies(InputStorage(i, 0), flat, Box{{static_cast<int>(first.at(j))}, to},
                        StorageOf(ops_[i]->outputs()[j]), to, WholeBox(to), InputElemBytes(i, 0),
                        &copies);
      }
      for (const CopyCommand& c : copies)
        runs_[i].steps.push_back(Step{nullptr, c, "copy", ops_[i].get()});
    } else if (runs_[i].plan.empty()) {
      prepares.push_back([this, i, &octx](std::mutex* turn) {
        if (cancel_) throw Error("cancelled: the partition is being freed");
        std::vector<Shape> in_shapes;
        std::vector<cl_mem> in, out;
        for (size_t k = 0; k < ops_[i]->inputs().size(); ++k) {
          in_shapes.push_back(values_.at(ops_[i]->inputs()[k]).shape);
          in.push_back(InputMem(i, k));
        }
        for (size_t j = 0; j < out_shapes_[i].size(); ++j)
          out.push_back(Mem(ops_[i]->outputs()[j]));
        OpContext op_ctx = WithEpilogue(OpCtx(octx, i), *ops_[i]);
        op_ctx.turn = turn;
        ops_[i]->Prepare(op_ctx, in_shapes, out_shapes_[i], in, out);
        for (const Launch& l : ops_[i]->launches())
          runs_[i].steps.push_back(Step{&l, {}, nullptr, ops_[i].get()});
      });
    } else {
      prepares.push_back([this, i, &octx](std::mutex* turn) {
        if (cancel_) throw Error("cancelled: the partition is being freed");
        OpContext chunk_ctx = octx;
        chunk_ctx.turn = turn;
        BindChunks(chunk_ctx, i);
      });
    }
  }
  {
    DebugTimer prepared("partition " + std::to_string(id_) + ": ops prepared (programs, weights)");
    progress_.Start(prepares.size());
    for (auto& p : prepares)
      p = [this, f = std::move(p)](std::mutex* turn) {
        f(turn);
        progress_.TaskDone();
      };
    RunTakingTurns(prepares, BuildThreads());
  }
}

// Each op's profile record (shapes, arithmetic, bytes); the weights' bytes.
size_t Partition::ProfileOps() {
  op_profiles_.assign(ops_.size(), {});
  size_t weight_bytes = 0;
  for (size_t i = 0; i < ops_.size(); ++i) {
    std::vector<Shape> in_shapes;
    OpProfile& prof = op_profiles_[i];
    for (int t : ops_[i]->inputs()) {
      in_shapes.push_back(values_.at(t).shape);
      prof.shape += (prof.shape.empty() ? "" : "x") + ShapeString(values_.at(t).shape);
      prof.bytes += double(NumElements(values_.at(t).shape)) * double(ElemBytes(t));
    }
    prof.shape += "->";
    for (size_t j = 0; j < out_shapes_[i].size(); ++j) {
      prof.shape += ShapeString(out_shapes_[i][j]);
      prof.bytes +=
          double(NumElements(out_shapes_[i][j])) * double(ElemBytes(ops_[i]->outputs()[j]));
    }
    prof.flops = ops_[i]->Flops(in_shapes, out_shapes_[i]);
    prof.bytes += ops_[i]->WeightBytes();
    weight_bytes += static_cast<size_t>(ops_[i]->WeightBytes());
  }
  return weight_bytes;
}

// Per chunk: copies of the input boxes into staging (or the whole tensor as it is),
// the chunk's kernels, and the copy of its output box out of staging.
void Partition::BindChunks(OpContext& octx, size_t i) {
  OpRun& run = runs_[i];
  const Op& op = *ops_[i];
  const size_t n_in = op.inputs().size();
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
      AppendBoxCopies(StorageOf(t), view, box, dst, sview, WholeBox(sview), ElemBytes(t), &copies);
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
    OpContext op_ctx = WithEpilogue(OpCtx(octx, i), op);
    chunk.Prepare(op_ctx, in_shapes, chunk_out, in, {out});
    run.steps.insert(run.steps.end(), copy_in.begin(), copy_in.end());
    for (const Launch& l : chunk.launches()) run.steps.push_back(Step{&l, {}, nullptr, &chunk});
    if (direct) continue;
    Shape sview;
    const Storage src = staging(n_in, obox, &sview);
    std::vector<CopyCommand> copies;
    AppendBoxCopies(src, sview, WholeBox(sview), StorageOf(out_t), out_view, obox, ElemBytes(out_t),
                    &copies);
    for (const CopyCommand& cc : copies) run.steps.push_back(Step{nullptr, cc, "copy_out", &chunk});
  }
}

}  // namespace clgpu
