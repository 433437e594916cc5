// The one ordered table of fold passes (fusion/pass.h), and what the passes share.
#include <algorithm>

#include "fusion/pass.h"
#include "ops/conv2d_selector.h"
#include "tflite/builtin.h"

namespace clgpu {

std::vector<std::unique_ptr<FusionPass>> FusionPasses() {
  std::vector<std::unique_ptr<FusionPass>> p;
  p.push_back(MakeAffinePass());
  p.push_back(MakePadPass());
  p.push_back(MakeClampPass());
  p.push_back(MakeEpiloguePass());
  p.push_back(MakeResidualPass());
  p.push_back(MakeViewsPass());
  p.push_back(MakeSqueezePass());
  p.push_back(MakeGatePass());
  p.push_back(MakeDsChainPass());
  p.push_back(MakeDepthwisePass());
  p.push_back(MakePreluPass());
  p.push_back(MakeRequantizePass());
  p.push_back(MakeExpandPass());
  p.push_back(MakePoolPass());
  p.push_back(MakeSqueezeTailPass());
  p.push_back(MakeGathersPass());
  p.push_back(MakeConcatPass());
  p.push_back(MakeConcatChainPass());
  p.push_back(MakeDenseChainPass());
  return p;
}

const std::vector<std::string>& FusionPassNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const auto& p : FusionPasses()) n.emplace_back(p->name());
    return n;
  }();
  return names;
}

void OrderForFolds(const GraphView& g, std::vector<NodeInfo>* nodes, const std::set<int>& outputs,
                   const std::vector<std::string>& fuse) {
  for (const auto& p : FusionPasses())
    if (std::find(fuse.begin(), fuse.end(), p->name()) != fuse.end()) p->Order(g, nodes, outputs);
}

std::optional<ConvGeometry> ConvReadingInput(const GraphView& g, const NodeInfo& n, int y) {
  if (n.op != tfl::kConv2d || n.inputs.empty() || n.inputs[0] != y ||
      std::count(n.inputs.begin(), n.inputs.end(), y) != 1)
    return std::nullopt;
  std::optional<ConvGeometry> cg = GraphConvGeometry(g, n);
  if (cg && cg->groups != 1) cg.reset();
  return cg;
}

TensorUses::TensorUses(const std::vector<NodeInfo>& nodes) {
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int t : nodes[i].outputs) producer[t] = i;
    for (int t : nodes[i].inputs) readers[t].push_back(i);
  }
}

bool IsClampOp(int32_t op) {
  return op == tfl::kRelu || op == tfl::kRelu6 || op == tfl::kReluN1To1 || op == tfl::kRelu0To1;
}

int ClampedOutput(const std::vector<NodeInfo>& nodes, const TensorUses& uses, const Folds& folds,
                  size_t i) {
  int t = nodes[i].outputs[0];
  for (auto w = folds.written_instead.find(t); w != folds.written_instead.end();
       w = folds.written_instead.find(t)) {
    const auto p = uses.producer.find(w->second);
    if (p == uses.producer.end() || !IsClampOp(nodes[p->second].op)) return -1;
    t = w->second;
  }
  return t;
}

std::map<int, size_t> ClampedWriters(const std::vector<NodeInfo>& nodes, const TensorUses& uses,
                                     const Folds& folds) {
  std::map<int, size_t> writer;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].outputs.size() == 1 && !IsClampOp(nodes[i].op))
      if (const int t = ClampedOutput(nodes, uses, folds, i); t >= 0) writer[t] = i;
  return writer;
}

int FoldPlan::Producer(int t, int* readers) {
  int producer = -1;
  *readers = 0;
  for (size_t j = 0; j < size(); ++j) {
    if (absorbed(j)) continue;
    for (int u : op(j).outputs()) producer = u == t ? int(j) : producer;
    for (int u : op(j).inputs()) *readers += u == t;
  }
  return producer;
}

}  // namespace clgpu
