// The runtime's planners on their own, for tests: plan_shared_objects() (a partition plans
// through it only on devices without sub-buffers) and launch_form_trial() (which launch form a
// partition keeps, fed made-up invoke times).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/typing.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "python/register.h"
#include "runtime/launch_forms.h"
#include "runtime/memory_planner.h"

namespace py = pybind11;

namespace clgpu::python {
namespace {

// Trials fed invoke i's time in the form trial order[i] picks: each trial's forms ('F' / 'S').
std::vector<std::string> RunTrials(const std::vector<int64_t>& fewer_ns,
                                   const std::vector<int64_t>& shorter_ns,
                                   const std::vector<int>& order, uint64_t key) {
  const int n = order.empty() ? 0 : *std::max_element(order.begin(), order.end()) + 1;
  std::vector<LaunchFormTrial> trials(n);
  std::vector<bool> started(n, false);
  std::vector<std::string> forms(n);
  for (size_t i = 0; i < order.size(); ++i) {
    LaunchFormTrial& t = trials[order[i]];
    if (!started[order[i]]) t.Reset(true, key), started[order[i]] = true;
    const LaunchForm f = t.Next();
    const bool fewer = f == LaunchForm::kFewerLaunches;
    forms[order[i]] += fewer ? 'F' : 'S';
    t.Record(f, fewer ? fewer_ns[i] : shorter_ns[i]);
  }
  return forms;
}

}  // namespace

void RegisterPlanner(py::module_& m) {
  m.def(
      "plan_shared_objects",
      [](const std::vector<std::tuple<size_t, int, int>>& usages, const std::string& strategy) {
        if (strategy != "search" && strategy != "greedy_by_size")
          throw Error("plan_shared_objects: strategy is 'search' or 'greedy_by_size'");
        std::vector<TensorUsage> tensors;
        for (const auto& [bytes, first, last] : usages) {
          if (first > last) throw Error("plan_shared_objects: first step after last step");
          tensors.push_back({bytes, first, last});
        }
        MemoryPlan plan;
        {
          py::gil_scoped_release release;
          plan = strategy == "search" ? PlanSharedObjects(tensors) : PlanGreedyBySize(tensors);
        }
        py::typing::Dict<py::str, py::object> r;
        r["assignment"] = plan.assignment;
        r["buffer_bytes"] = plan.buffer_bytes;
        r["allocated_bytes"] = plan.allocated_bytes;
        r["naive_bytes"] = plan.naive_bytes;
        r["lower_bound_bytes"] = plan.lower_bound_bytes;
        r["shared_lower_bound_bytes"] = plan.shared_lower_bound_bytes;
        r["valid"] = IsValidSharedPlan(tensors, plan);
        return r;
      },
      py::arg("usages"), py::arg("strategy") = "search",
      "Shared buffers for tensors given as (bytes, first step, last step inclusive).");
  m.def(
      "launch_form_trial",
      [](const std::vector<int64_t>& fewer_ns, const std::vector<int64_t>& shorter_ns) {
        if (fewer_ns.size() != shorter_ns.size())
          throw Error("launch_form_trial: one time per invoke in each form");
        if (fewer_ns.empty()) return std::string();
        return RunTrials(fewer_ns, shorter_ns, std::vector<int>(fewer_ns.size(), 0), 0)[0];
      },
      py::arg("fewer_ns"), py::arg("shorter_ns"),
      "The forms a partition's invokes run ('F': fewer launches, 'S': shorter on the device) "
      "where invoke i would take fewer_ns[i] or shorter_ns[i].");
  m.def(
      "launch_form_trials",
      [](const std::vector<int64_t>& fewer_ns, const std::vector<int64_t>& shorter_ns,
         const std::vector<int>& order, uint64_t key) {
        if (fewer_ns.size() != shorter_ns.size() || order.size() != fewer_ns.size())
          throw Error("launch_form_trials: one time per invoke in each form, one trial each");
        if (!order.empty() && (*std::min_element(order.begin(), order.end()) < 0 ||
                               *std::max_element(order.begin(), order.end()) > 63))
          throw Error("launch_form_trials: trials are numbered 0..63");
        return RunTrials(fewer_ns, shorter_ns, order, key);
      },
      py::arg("fewer_ns"), py::arg("shorter_ns"), py::arg("order"), py::arg("key"),
      "launch_form_trial for several partitions whose invoke i is trial order[i]'s, each trial "
      "made at its first invoke, all of `key` (0: each its own): each trial's forms.");
}

}  // namespace clgpu::python
