// The one ordered table of fold passes (fusion/pass.h), and what the passes share.
#include <algorithm>

#include "fusion/pass.h"

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
  p.push_back(MakeDepthwisePass());
  p.push_back(MakePreluPass());
  p.push_back(MakeExpandPass());
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
