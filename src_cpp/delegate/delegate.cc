#include "delegate/delegate.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include "common/error.h"
#include "common/log.h"
#include "delegate/claim.h"
#include "delegate/constant_folding.h"
#include "delegate/cost_model.h"
#include "graph/validate.h"
#include "ops/cpu_kernel_rules.h"
#include "ops/densify.h"
#include "ops/hybrid_weights.h"
#include "ops/op.h"
#include "ops/shape_folding.h"
#include "runtime/split.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// A partition's estimate this close to the margin (device_ms / (margin x cpu_ms)) is refined
// before it is decided where it counts the calibrated launch: the driver's two launch levels
// move it by up to a fifth either way (docs/partitioning.md; by kind, nothing is measured).
constexpr double kCloseCallLow = 0.8, kCloseCallHigh = 1.25;

TfLiteStatus PrepareTrampoline(TfLiteContext* ctx, TfLiteDelegate* d) {
  return DelegateCore::From(d)->Prepare(ctx);
}

// malloc'ed like the runtime's own arrays; freed by us after Replace.
TfLiteIntArray* NewIntArray(const std::vector<int>& v) {
  auto* a = static_cast<TfLiteIntArray*>(std::malloc(sizeof(int) * (1 + v.size())));
  if (!a) throw std::bad_alloc();
  a->size = static_cast<int>(v.size());
  std::copy(v.begin(), v.end(), a->data);
  return a;
}

}  // namespace

OpContext DelegateCore::MakeOpContext() const {
  OpContext c{*env_, queue(), OpOptions{options_.conv_algorithm, options_.gemm_splits}};
  c.storage_defines = storage_defines();
  c.storage_bytes = storage_bytes();
  c.float_bytes = storage_bytes();
  c.disk = disk_.get();
  c.max_alloc = max_alloc_bytes();
  return c;
}

TfLiteDelegate* DelegateCore::Create(const Options& options) {
  auto core = std::make_shared<DelegateCore>(options);
  core->self_ = core;
  return &core->tfl_;
}

void DelegateCore::Destroy(TfLiteDelegate* d) {
  if (!d) return;
  DelegateCore* core = From(d);
  // Dropping the self-reference frees the core now, or when the last kernel goes.
  std::shared_ptr<DelegateCore> keep = std::move(core->self_);
}

DelegateCore::DelegateCore(const Options& options) : options_(options) {
  const auto t0 = std::chrono::steady_clock::now();
  env_ = Environment::ForDevice(SelectDevice(options_.device));
  // Listing and context: the driver's one-time cost (or warm_up()'s wait), reported apart.
  driver_setup_us_ =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  queue_ = env_->CreateQueue(options_.profiling);
  if (options_.profiling) profiler_.set_event_overhead_ns(EventOverheadNs(*env_, queue_.get()));
  if (!options_.serialization_dir.empty())
    disk_ = std::make_unique<BinaryCache>(options_.serialization_dir, options_.model_token);
  if (options_.partitioning == Partitioning::kCost)  // the only user of the figures
    device_costs_ = CalibratedDeviceCosts(*env_, queue_.get(), options_.serialization_dir);
  half_storage_ = options_.precision == Precision::kFp16 ||
                  (options_.precision == Precision::kAuto &&
                   (env_->device().profile.auto_fp16 || options_.auto_fp16_anywhere));
  settings_.profiling = options_.profiling;
  settings_.capture_tensors = options_.capture_tensors;
  settings_.fuse_add = options_.fuse_add();
  settings_.fuse = options_.fuse;
  settings_.cpu_warmup = options_.cpu_warmup;
  settings_.fp16_fallback = half_storage_ && options_.precision == Precision::kAuto;
  tfl_.data_ = this;
  tfl_.Prepare = PrepareTrampoline;
  tfl_.flags = kTfLiteDelegateFlagsAllowDynamicTensors;
}

std::vector<NodeDecision> DelegateCore::decisions() const {
  std::lock_guard<std::mutex> l(report_mutex_);
  std::vector<NodeDecision> out;
  for (const SubgraphClaims& s : subgraphs_)
    out.insert(out.end(), s.decisions.begin(), s.decisions.end());
  return out;
}
std::vector<std::vector<int>> DelegateCore::partitions() const {
  std::lock_guard<std::mutex> l(report_mutex_);
  std::vector<std::vector<int>> out;
  for (const SubgraphClaims& s : subgraphs_)
    out.insert(out.end(), s.partitions.begin(), s.partitions.end());
  return out;
}
std::vector<int> DelegateCore::partition_subgraphs() const {
  std::lock_guard<std::mutex> l(report_mutex_);
  std::vector<int> out;
  for (size_t i = 0; i < subgraphs_.size(); ++i)
    out.insert(out.end(), subgraphs_[i].partitions.size(), static_cast<int>(i));
  return out;
}

// The index of the subgraph `ctx` belongs to (-1 if the runtime cannot tell): the subgraph whose
// context AcquireSubgraphContext hands back as `ctx` itself. Acquire and Release nest, so acquiring
// the subgraph being prepared is harmless; the search stops there, never past the last subgraph.
static int SubgraphIndex(TfLiteContext* ctx) {
  if (!ctx->AcquireSubgraphContext || !ctx->ReleaseSubgraphContext) return -1;
  for (int i = 0; i < (1 << 16); ++i) {
    TfLiteContext* c = nullptr;
    if (ctx->AcquireSubgraphContext(ctx, i, &c) != kTfLiteOk) return -1;
    ctx->ReleaseSubgraphContext(ctx, i);
    if (c == ctx) return i;
  }
  return -1;
}

// TFLite prepares an interpreter's subgraphs in order, the primary one first, and again in order
// when it re-applies the delegate or a new interpreter takes it: subgraph 0 starts a new report.
void DelegateCore::RecordClaims(TfLiteContext* ctx, std::vector<NodeDecision> decisions,
                                std::vector<std::vector<int>> partitions) {
  int index = SubgraphIndex(ctx);
  if (index < 0) index = 0;  // no way to tell: the last Prepare alone, as before
  if (index == 0) subgraphs_.clear();
  if (subgraphs_.size() <= static_cast<size_t>(index)) subgraphs_.resize(index + 1);
  for (NodeDecision& d : decisions) d.subgraph = index;
  SubgraphClaims& s = subgraphs_[index];
  s.decisions = std::move(decisions);
  s.partitions = std::move(partitions);
}

namespace {

// The plan's nodes as the delegate reads them (a node it cannot read is left alone), and what
// their records say of the runtime's layout (*abi).
std::vector<NodeInfo> ReadPlanNodes(TfLiteContext* ctx, const std::vector<int>& plan,
                                    AbiObservation* abi) {
  AbiObservation& a = *abi;
  std::vector<NodeInfo> nodes;
  TfLiteNode* prev = nullptr;
  int prev_index = -1;
  for (int index : plan) {
    bool ok = false;
    NodeInfo n = ReadNode(ctx, index, &ok);
    if (!ok) continue;  // a node we cannot read is simply left alone
    TfLiteNode* node = nullptr;
    TfLiteRegistration* reg = nullptr;
    ctx->GetNodeAndRegistration(ctx, index, &node, &reg);
    a.node_to_registration = reinterpret_cast<char*>(reg) - reinterpret_cast<char*>(node);
    if (prev && index > prev_index)
      a.node_stride =
          (reinterpret_cast<char*>(node) - reinterpret_cast<char*>(prev)) / (index - prev_index);
    prev = node;
    prev_index = index;
    ++a.nodes_seen;
    nodes.push_back(std::move(n));
  }
  return nodes;
}

// What TFLite would make of these claimed nodes: its partitions.
// The tensors some node of the plan writes.
std::set<int> WrittenTensors(const std::vector<NodeInfo>& nodes) {
  std::set<int> written;
  for (const NodeInfo& n : nodes)
    for (int t : n.outputs)
      if (t >= 0) written.insert(t);
  return written;
}

PreviewFn MakePreview(TfLiteContext* ctx) {
  return [ctx](const std::vector<int>& claimed) {
    std::vector<PartitionPreview> parts;
    TfLiteIntArray* nodes_array = NewIntArray(claimed);
    TfLiteDelegateParams* p = nullptr;
    int num_parts = 0;
    if (ctx->PreviewDelegatePartitioning(ctx, nodes_array, &p, &num_parts) == kTfLiteOk) {
      auto vec = [](const TfLiteIntArray* a) {
        return std::vector<int>(a->data, a->data + a->size);
      };
      for (int i = 0; i < num_parts; ++i)
        parts.push_back(
            {vec(p[i].nodes_to_replace), vec(p[i].input_tensors), vec(p[i].output_tensors)});
    }
    std::free(nodes_array);
    return parts;
  };
}

}  // namespace

// Whether node n can run on the device, and if not why: `whole` when the whole model stays on
// the CPU, else the common checks, the handler's own and the allocation limit.
NodeDecision DelegateCore::DecideNode(const GraphView& graph, const NodeInfo& n,
                                      const std::string& whole,
                                      const std::map<int, std::string>& sparse_refused,
                                      AbiObservation* abi) const {
  NodeDecision d;
  d.node = n.index;
  d.op = n.op;
  const OpHandler* h = FindOpHandler(n.op);
  if (h) {
    d.op_name = h->name;
    try {
      d.reason = !whole.empty() ? whole : CheckNodeCommon(graph, n);
      if (d.reason.empty()) d.reason = CheckCpuPrepare(graph, n);
      if (d.reason.empty()) d.reason = h->check(graph, n);
    } catch (const std::exception& e) {
      d.reason = "could not read the node: " + What(e);
    }
    if (d.reason.empty()) d.reason = CheckAllocationLimit(graph, n, *h, &d.note);
    if (d.reason.empty()) {
      abi->params_read.push_back("node " + std::to_string(n.index) + " " + h->name + " " +
                                 DescribeNode(*h, n));
    }
  } else if (n.op == tfl::kDequantize) {
    d.op_name = "DEQUANTIZE";
    d.reason = "only a constant FLOAT16 or int8 weight feeding a delegated op is claimed";
  } else if (*DensifyNodeName(n.op)) {
    d.op_name = DensifyNodeName(n.op);
    auto it = sparse_refused.find(n.index);
    d.reason = it != sparse_refused.end()
                   ? it->second
                   : "only a sparse constant weight feeding a delegated op is claimed";
  } else if (*ShapeNodeName(n.op)) {
    d.op_name = ShapeNodeName(n.op);
    d.reason = "only a shape computation feeding delegated ops is claimed";
  } else {
    d.reason = "op not supported";
  }
  // "none": a measured plan found the CPU alone fastest (clgpu_delegate.plan).
  if (d.reason.empty() && options_.partitioning == Partitioning::kNone)
    d.reason = "partitioning=none";
  d.claimed = d.reason.empty();
  return d;
}

// Without a compiler for our kernels the whole model stays on the CPU (with a warning) instead
// of the interpreter failing: true when a first program builds. Not with cpu_warmup, whose
// start does not wait for a compiler: there the partitions' own builds fail on their setup
// threads and they stay on TFLite's CPU kernels (one warning each).
bool DelegateCore::DeviceBuilds(TfLiteContext* ctx, ClaimPlan* claim) {
  try {
    if (!options_.cpu_warmup) env_->programs().Get("device_probe", storage_defines(), disk_.get());
  } catch (const Error& e) {
    Log(LogLevel::kWarning, "the device cannot build our kernels; running on the CPU: " + What(e));
    std::lock_guard<std::mutex> l(report_mutex_);
    for (auto& d : claim->decisions)
      if (d.claimed) {
        d.claimed = false;
        d.reason = "device program build failed (see warning)";
      }
    RecordClaims(ctx, claim->decisions, {});
    return false;
  }
  return true;
}

PartitionEstimate DelegateCore::EstimateClaim(const GraphView& graph,
                                              const std::vector<NodeInfo>& ops,
                                              const PartitionPreview& p, const CpuCosts& cpu) {
  const int folded = static_cast<int>(p.nodes.size() - ops.size());
  auto estimate = [&] {
    return EstimatePartition(graph, ops, p.inputs, p.outputs, env_->device(),
                             TransferCosts(device_costs_, zero_copy()), cpu, options_.fuse, folded);
  };
  PartitionEstimate e = estimate();
  // Too close to call on a first reading of the launch cost, which may have met the driver's
  // slower level: measure the lower level once, and estimate again.
  if (e.margin_ratio > kCloseCallLow && e.margin_ratio < kCloseCallHigh && !device_costs_.refined &&
      !LaunchCostsByKind(env_->device())) {
    RefineDeviceCosts();
    e = estimate();
  }
  return e;
}

void DelegateCore::RefineDeviceCosts() {
  // Partitions of other interpreters sharing this delegate may be invoking on the queue.
  std::lock_guard<std::mutex> lock(queue_mutex_);
  device_costs_ =
      RefinedDeviceCosts(*env_, queue_.get(), options_.serialization_dir, device_costs_);
}

TfLiteStatus DelegateCore::Prepare(TfLiteContext* ctx) {
  DebugTimer timer("delegate prepare (claims, then the partitions' kernel init)");
  try {
    tensor_room_.Forget();  // this context may sit where a freed one did
    TfLiteIntArray* plan_array = nullptr;
    if (ctx->GetExecutionPlan(ctx, &plan_array) != kTfLiteOk || !plan_array)
      throw Error("GetExecutionPlan failed");
    const std::vector<int> plan(plan_array->data, plan_array->data + plan_array->size);

    GraphView graph(ctx);
    graph.set_cpu_kernels(IdentifyCpuKernels(ctx, options_.runtime));
    AbiObservation abi;
    abi.tensors_size = ctx->tensors_size;
    std::vector<NodeInfo> nodes = ReadPlanNodes(ctx, plan, &abi);
    graph.SetWritten(WrittenTensors(nodes));

    // Weights stored as sparse constants behind DENSIFY, or as FLOAT16 constants behind
    // DEQUANTIZE (or both, DENSIFY first), count as constants.
    // So do shape computations on constants and tensor shapes: they make RESHAPEs static.
    std::map<int, std::string> sparse_refused;
    std::vector<const NodeInfo*> dequantizes = FoldConstantDensifies(graph, nodes, &sparse_refused);
    for (const NodeInfo* n : FoldConstantDequantizes(graph, nodes)) dequantizes.push_back(n);
    // Dynamic-range models' int8 weights read as float by their ops (ops/hybrid_weights.h);
    // before the shape folding, whose inferred shapes pass only through ops it could claim (a
    // hybrid FULLY_CONNECTED between a folded RESHAPE and the next: TensorFlow's Tensordot).
    MarkHybridWeights(graph, nodes);
    for (const NodeInfo* n : FoldShapeComputations(graph, nodes)) dequantizes.push_back(n);

    InferCpuOutputTypes(graph, nodes);
    // And subgraphs of constants alone (Swin's masks), evaluated once by the CPU kernels, in the
    // types those kernels give their outputs.
    std::string unfolded;
    for (const NodeInfo* n : FoldConstantSubgraphs(graph, nodes, ctx, &tensor_room_, &unfolded))
      dequantizes.push_back(n);
    if (!unfolded.empty()) Log(LogLevel::kInfo, "constant subgraphs not folded: " + unfolded);
    // Reasons to leave the whole model to the CPU (ops/cpu_kernel_rules.h).
    bool warn = false;
    const std::string whole = WholeModelOnCpu(graph, nodes, &warn);
    if (warn) Log(LogLevel::kWarning, "the delegate claims nothing in this model: " + whole);
    ClaimPlan claim;
    for (const NodeInfo& n : nodes)
      claim.decisions.push_back(DecideNode(graph, n, whole, sparse_refused, &abi));
    KeepInt32ValuesForTheirReaders(graph, nodes, &claim.decisions);
    // The CPU the estimates weigh the device against: XNNPACK on this interpreter's threads.
    const CpuCosts cpu = CpuCostsFor(ctx->recommended_num_threads);
    if (options_.partitioning == Partitioning::kCost)
      LeaveEdgeConversionsToCpu(graph, nodes, device_costs_, cpu, &claim.decisions);

    const PreviewFn preview = MakePreview(ctx);
    KeepFn keep;
    std::map<std::vector<int>, std::string> kept_figures;  // partition nodes -> its estimate
    if (options_.partitioning == Partitioning::kCost)
      keep = [&](const PartitionPreview& p, const std::vector<NodeInfo>& ops) {
        const PartitionEstimate e = EstimateClaim(graph, ops, p, cpu);
        if (e.keep) kept_figures[p.nodes] = "cost: kept, " + e.figures;
        return e.keep ? std::string() : e.reason;
      };
    PlanClaims(nodes, dequantizes, preview, keep, options_.max_delegated_partitions, &claim);
    // inspect shows each kept partition's estimate on its first node.
    for (const PartitionPreview& p : claim.partitions) {
      auto f = kept_figures.find(p.nodes);
      if (f == kept_figures.end() || p.nodes.empty()) continue;
      for (NodeDecision& d : claim.decisions)
        if (d.node == p.nodes.front())
          d.note = d.note.empty() ? f->second : d.note + "; " + f->second;
    }
    const std::vector<int>& to_replace = claim.nodes;
    std::vector<std::vector<int>> parts;
    for (const PartitionPreview& p : claim.partitions) parts.push_back(p.nodes);
    {
      std::lock_guard<std::mutex> l(report_mutex_);
      RecordClaims(ctx, claim.decisions, parts);
      abi_ = abi;
      ++stats_.prepares;
    }
    if (to_replace.empty()) return kTfLiteOk;

    if (!DeviceBuilds(ctx, &claim)) return kTfLiteOk;

    TfLiteRegistrationPadded reg{};
    reg.reg = PartitionKernelRegistration();
    TfLiteIntArray* nodes_array = NewIntArray(to_replace);
    current_graph_ = &graph;
    const TfLiteStatus status =
        ctx->ReplaceNodeSubsetsWithDelegateKernels(ctx, reg, nodes_array, &tfl_);
    current_graph_ = nullptr;
    std::free(nodes_array);
    return status;
  } catch (const std::exception& e) {
    current_graph_ = nullptr;
    ctx->ReportError(ctx, "clgpu_delegate: Prepare failed: %s", What(e).c_str());
    return kTfLiteError;
  } catch (...) {
    current_graph_ = nullptr;
    ctx->ReportError(ctx, "clgpu_delegate: Prepare failed: an exception of unknown type");
    return kTfLiteError;
  }
}

}  // namespace clgpu
