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
