#include "runtime/partition.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "cl/errors.h"
#include "common/env.h"
#include "common/error.h"
#include "common/log.h"
#include "ops/group_rewrite.h"
#include "runtime/memory_planner.h"
#include "tflite/builtin.h"

namespace clgpu {

size_t Partition::Value::host_bytes() const {
  return static_cast<size_t>(NumElements(shape)) * HostElementBytes(type);
}

size_t Partition::ElemBytes(int t) const {
  const Value& v = values_.at(t);
  return v.type == ValueType::kFloat ? (half_ && v.half ? 2 : 4) : HostElementBytes(v.type);
}

OpContext Partition::MakeOpContext() const {
  OpContext c = host_->MakeOpContext();
  return half_ || !host_->half_storage() ? c : c.WithFloat32Storage();
}

OpContext Partition::OpCtx(const OpContext& octx, size_t i) const {
  const Op& op = *ops_[i];
  ValueType common = ValueType::kUnsupported;
  bool same = true, float32 = false, storage_float = false;
  for (const auto* list : {&op.inputs(), &op.outputs()})
    for (int t : *list) {
      const ValueType vt = values_.at(t).type;
      if (common == ValueType::kUnsupported) common = vt;
      same = same && vt == common;
      float32 = float32 || vt == ValueType::kFloat32;
      storage_float = storage_float || vt == ValueType::kFloat;
    }
  const OpContext c = StorageCtx(octx, i);
  if (same && IsQuantized(common)) return c.ForValues(common);
  // A quantization boundary whose float side is kept float32.
  if (float32 && !storage_float) return c.ForValues(ValueType::kFloat32);
  return c;
}

Partition::Partition(TfLiteContext* ctx, const TfLiteDelegateParams* params,
                     std::shared_ptr<PartitionHost> host)
    : host_(std::move(host)) {
  if (!host_) throw Error("the delegate was destroyed before its kernels were created");
  id_ = host_->NextPartitionId();
  half_ = host_->half_storage();
  DebugTimer timer("partition " + std::to_string(id_) + ": ops made");
  zero_copy_ = host_->zero_copy();
  // "first,every": a flush policy to time against the default (bench/ab_options.py).
  if (const std::vector<double> f =
          EnvNumbers("CLGPU_FLUSH", 2, "FIRST,EVERY (positive integers)",
                     [](const std::vector<double>& v) { return WholeAtLeast(v, 1); });
      !f.empty()) {
    flush_first_ = static_cast<int>(f[0]);
    flush_every_ = static_cast<int>(f[1]);
  }
  const GraphView* graph = host_->current_graph();
  if (!graph) throw Error("kernel init outside delegate Prepare");
  const std::set<int> outputs(params->output_tensors->data,
                              params->output_tensors->data + params->output_tensors->size);
  const std::set<int> inputs(params->input_tensors->data,
                             params->input_tensors->data + params->input_tensors->size);
  std::vector<NodeInfo> nodes;  // the nodes that run as ops
  std::set<int> shape_nodes;    // folded shape computations
  std::vector<int> folded_weights;
  for (int i = 0; i < params->nodes_to_replace->size; ++i) {
    bool ok = false;
    NodeInfo node = ReadNode(ctx, params->nodes_to_replace->data[i], &ok);
    if (!ok) throw Error("cannot read node " + std::to_string(params->nodes_to_replace->data[i]));
    // A folded shape computation (ops/shape_folding.h): its consumers read its value at
    // Prepare; nothing runs.
    if (node.outputs.size() == 1 && graph->FoldedIntsOf(node.outputs[0])) {
      shape_nodes.insert(node.index);
      continue;
    }
    if ((node.op == tfl::kDequantize && graph->IsFoldedDequantizeOutput(node.outputs[0])) ||
        graph->IsComputedConstant(node.outputs[0])) {
      // A folded weight (FLOAT16 DEQUANTIZE, DENSIFY): its value is a constant of this partition,
      // held on the host below only where an op reads it as an operand or it is an output (a
      // conv's or FULLY_CONNECTED's weights are the op's own).
      Value& v = values_[node.outputs[0]];
      v.kind = Kind::kConstant;
      v.shape = graph->shape(node.outputs[0]);
      v.is_partition_output = outputs.count(node.outputs[0]) != 0;
      folded_weights.push_back(node.outputs[0]);
      continue;
    }
    nodes.push_back(std::move(node));
  }
  // Groups of nodes one op runs (ops/group_rewrite.h), created at the group's last node. Off,
  // like the plans' fusions, without fuse_add or with capture_tensors (which reads every tensor).
  std::vector<GroupRewrite> groups;
  if (host_->settings().fuse_add && !host_->settings().capture_tensors) {
    OrderForFolds(*graph, &nodes, outputs, host_->settings().fuse);  // as the cost model does
    groups = FindGroupRewrites(*graph, nodes, outputs);
  }
  std::map<size_t, const GroupRewrite*> group_at;  // last node -> its group; others: nullptr
  for (const GroupRewrite& r : groups)
    for (size_t k : r.nodes) group_at[k] = k == r.nodes.back() ? &r : nullptr;
  std::vector<NodeInfo> op_nodes;  // per op, for the fusions
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInfo& node = nodes[i];
    // Under precision auto, each op twice: the second set runs if the values leave fp16's range
    // (ops keep the weights they uploaded, in the storage of their first prepare).
    const bool twice = half_ && host_->settings().fp16_fallback;
    if (const auto g = group_at.find(i); g != group_at.end()) {
      if (!g->second) continue;
      ops_.push_back(g->second->make(*graph));
      if (twice) fp32_ops_.push_back(g->second->make(*graph));
      op_nodes.push_back(g->second->info);
    } else {
      const OpHandler* h = FindOpHandler(node.op);
      if (!h) throw Error("node " + std::to_string(node.index) + " is not ours");
      ops_.push_back(h->create(*graph, node));
      if (twice) fp32_ops_.push_back(h->create(*graph, node));
      op_nodes.push_back(node);
    }
    RegisterValues(*graph, *ops_.back(), inputs, outputs);
    if (const Op& op = *ops_.back(); op.IsFlatCopy() && op.outputs().size() == 1)
      copied_from_[op.outputs()[0]] = op.inputs()[0];
  }
  FinishValues(*graph, folded_weights);
  // What each fold may take on this graph; each plan decides with its shapes (ApplyFolds).
  passes_ = FusionPasses();
  Folds found;
  const FoldGraph fold_graph{*graph, op_nodes, outputs, host_->env().device()};
  for (const auto& p : passes_) p->Find(fold_graph, &found);
  if (host_->settings().cpu_warmup) {
    std::set<int> boundary = inputs;
    boundary.insert(outputs.begin(), outputs.end());
    cpu_ = std::make_unique<CpuFallback>(
        ctx->GetNodeAndRegistration, &host_->tensor_room(),
        std::vector<int>(params->nodes_to_replace->data,
                         params->nodes_to_replace->data + params->nodes_to_replace->size),
        std::move(boundary), std::move(shape_nodes));
  }
  host_->CountKernelCreated();
}

// The values op reads and writes, as the graph has them: constants with their data, the
// partition's inputs and outputs, internal activations.
void Partition::RegisterValues(const GraphView& graph, const Op& op, const std::set<int>& inputs,
                               const std::set<int>& outputs) {
  for (int t : op.inputs()) {
    if (values_.count(t)) continue;
    Value& v = values_[t];
    v.type = graph.value_type(t);
    if (graph.IsConstant(t)) {
      v.kind = Kind::kConstant;
      v.shape = graph.shape(t);
      if (v.type == ValueType::kFloat) {
        v.constant = graph.ConstantFloats(t);
      } else {
        v.constant_bytes = graph.ConstantBytes(t);
      }
    } else if (inputs.count(t)) {
      v.kind = Kind::kInput;
    }
  }
  for (int t : op.outputs()) {
    Value& v = values_[t];
    v.type = graph.value_type(t);
    v.is_partition_output = outputs.count(t) != 0;
    v.kind = v.is_partition_output ? Kind::kOutput : Kind::kInternal;
  }
}

// Once every op is made: folded weights that an op reads as an operand (or that leave the
// partition) held on the host, float values only quantization-boundary ops touch kept float32,
// shape reads, and the lists of uploads and downloads.
void Partition::FinishValues(const GraphView& graph, const std::vector<int>& folded_weights) {
  {
    std::set<int> operands;
    for (const auto& op : ops_) operands.insert(op->inputs().begin(), op->inputs().end());
    for (int t : folded_weights)
      if (operands.count(t) || values_[t].is_partition_output)
        values_[t].constant = graph.ConstantFloats(t);
  }
  // Float values that only quantization-boundary ops touch stay float32 (Op::KeepsFloat32).
  std::map<int, bool> keep;
  for (const auto& op : ops_)
    for (const auto* list : {&op->inputs(), &op->outputs()})
      for (int t : *list)
        if (values_[t].type == ValueType::kFloat && values_[t].kind != Kind::kConstant)
          keep[t] = (keep.count(t) ? keep[t] : true) && op->KeepsFloat32();
  for (const auto& [t, k] : keep)
    if (k) values_[t].type = ValueType::kFloat32;
  for (const auto& op : ops_)
    for (int t : op->ShapeInputs())
      if (!values_.count(t)) shape_reads_[t];
  for (auto& [t, v] : values_) {
    if (v.kind == Kind::kInput) uploads_.push_back(t);
    if (v.is_partition_output) downloads_.push_back(t);
  }
}

Partition::~Partition() {
  cancel_ = true;
  FinishSetup();
  ReleaseLaunches();  // kernels go before the buffers they use (see Op::ClearLaunches)
  host_->DropMemoryReport(id_);
}

cl_mem Partition::TransferMem(int t) const {
  const Value& v = values_.at(t);
  return v.transfer ? v.transfer.get() : Mem(t);
}

Storage Partition::StorageOf(int t) const {
  const Value& v = values_.at(Root(t));  // an alias has its root's elements, in order
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
    const ValueType vt =
        values_[t].type == ValueType::kFloat32 ? ValueType::kFloat : values_[t].type;
    if (ValueTypeOf(x.type) != vt)
      throw Error("partition input " + std::to_string(t) + " is not " +
                  ValueTypeName(values_[t].type));
    Shape s = TensorShape(x);
    if (s != values_[t].shape) {
      values_[t].shape = std::move(s);
      changed = true;
    }
  }
  for (auto& [t, shape] : shape_reads_) {
    Shape s = TensorShape(ctx->tensors[t]);
    if (s != shape) shape = std::move(s), changed = true;
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
  for (Conversion& c : conversions_) c.launch = Launch{};
}

// Keeps the output of each RESHAPE, SQUEEZE or EXPAND_DIMS (a flat copy) in its input's storage,
// or the input in the output's, instead of copying: both are the same elements in the same order,
// and neither is written again. The output follows an input of the partition or an activation; an
// activation that only the copy reads, into a partition output, is written there (a boundary
// output may be a write-only host buffer under zero-copy). Not for tensors kept in
// pieces, and not when both are boundary tensors (which may live in TFLite's memory). Off with
// capture_tensors, which reads every tensor back.
void Partition::AliasFlatCopies() {
  if (host_->settings().capture_tensors) return;
  auto plain = [](const Value& v) { return !v.elided && v.pieces.empty(); };
  // First the outputs into their inputs' storage, then the inputs into outputs', once every
  // reader of an input's storage (through aliases too) is known.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < ops_.size(); ++i) {
      const Op& op = *ops_[i];
      if (absorbed_[i] || !op.IsFlatCopy()) continue;
      const int x = op.inputs()[0], y = op.outputs()[0];
      Value &vx = values_.at(x), &vy = values_.at(y);
      // One storage for both (under precision auto an fp32 op's values are float32).
      if (!plain(vx) || !plain(vy) || vx.kind == Kind::kConstant || ElemBytes(x) != ElemBytes(y))
        continue;
      if (pass == 0 && vy.kind == Kind::kInternal && !vy.is_partition_output) {
        vy.alias = x;
      } else if (pass == 1 && vx.kind == Kind::kInternal && !vx.is_partition_output &&
                 vx.alias < 0 && vy.kind == Kind::kOutput && !StorageReadBesides(x, i)) {
        vx.alias = y;
      } else {
        continue;
      }
      absorbed_[i] = true;
    }
  }
}

// Whether an op other than ops_[op] reads tensor t's storage (t, or a tensor aliased to it).
bool Partition::StorageReadBesides(int t, size_t op) const {
  for (size_t j = 0; j < ops_.size(); ++j)
    if (j != op && !absorbed_[j])
      for (int u : ops_[j]->inputs())
        if (Root(u) == t) return true;
  return false;
}

bool Partition::RunsNothing(size_t op) const {
  if (absorbed_.at(op)) return true;
  for (int t : ops_[op]->outputs())
    if (NumElements(values_.at(t).shape) != 0) return false;
  return true;
}

void Partition::Prepare(TfLiteContext* ctx) {
  if (cpu_) {
    host_->tensor_room().Granted(ctx);  // TFLite's room before this kernel's prepare
    return PrepareWarm(ctx);
  }
  if (InputShapesChanged(ctx) || !device_planned_) Plan(ctx);
  if (!bound_ || HostPointersChanged(ctx)) Bind(ctx);
}

}  // namespace clgpu
