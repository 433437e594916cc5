// fp16 storage's range check (runtime/partition.h): a kernel whose store saturates a finite
// value at +-65504 (kernels/common.cl, sat_half) sets its op's word of overflow_flag_, and the
// input conversion of a partition input that of the input. The words come back with the outputs,
// in the invoke's one wait. Under precision auto a set word makes its op (an input's: the ops
// reading it) run in float32 from then on, this invoke again included (partition_storage.cc);
// under precision fp16 it is said once.
#include <algorithm>
#include <set>
#include <string>

#include "cl/errors.h"
#include "common/log.h"
#include "runtime/partition.h"

namespace clgpu {

void Partition::BindOverflowFlags() {
  overflow_watch_ = false;
  if (!half_) return;
  const size_t words = ops_.size() + uploads_.size();
  if (overflow_flag_.bytes() != words * sizeof(int32_t)) {
    overflow_flag_ = host_->env().CreateBuffer(std::max<size_t>(words, 1) * sizeof(int32_t));
    const int32_t zero = 0;
    CheckCl(Cl().clEnqueueFillBuffer(host_->queue(), overflow_flag_.get(), &zero, sizeof zero, 0,
                                     overflow_flag_.bytes(), 0, nullptr, nullptr),
            "clEnqueueFillBuffer");
    overflow_host_.assign(words, 0);
  }
  for (size_t i = 0; i < ops_.size(); ++i)
    for (const Step& st : runs_[i].steps)
      if (st.launch) SetOverflowFlag(st.launch->kernel, overflow_flag_.get(), static_cast<int>(i));
  for (size_t k = 0; k < uploads_.size(); ++k) {
    const Value& v = values_.at(uploads_[k]);
    const int slot = static_cast<int>(ops_.size() + k);
    if (v.convert.kernel) SetOverflowFlag(v.convert.kernel, overflow_flag_.get(), slot);
    for (const Value::Range& r : v.ranges)
      if (r.convert.kernel) SetOverflowFlag(r.convert.kernel, overflow_flag_.get(), slot);
  }
  // Watched until a word is seen set: precision fp16 then says so once and stops looking.
  overflow_watch_ = !warned_overflow_;
}

void Partition::EnqueueOverflowRead(cl_command_queue q) {
  if (!overflow_watch_) return;
  CheckCl(Cl().clEnqueueReadBuffer(q, overflow_flag_.get(), CL_FALSE, 0, overflow_flag_.bytes(),
                                   overflow_host_.data(), 0, nullptr, nullptr),
          "clEnqueueReadBuffer(overflow)");
}

std::vector<int> Partition::OverflowNodes() const {
  std::set<int> nodes;
  for (size_t i = 0; i < ops_.size(); ++i)
    if (overflow_host_[i]) nodes.insert(ops_[i]->node_index());
  // A partition input past the range: the ops that read it.
  for (size_t k = 0; k < uploads_.size(); ++k) {
    if (!overflow_host_[ops_.size() + k]) continue;
    for (const auto& op : ops_)
      if (std::count(op->inputs().begin(), op->inputs().end(), uploads_[k]))
        nodes.insert(op->node_index());
  }
  return {nodes.begin(), nodes.end()};
}

// The ops whose words are set, and the running ops that read a partition input whose word is.
std::vector<size_t> Partition::OverflowOps() const {
  std::set<size_t> ops;
  for (size_t i = 0; i < ops_.size(); ++i)
    if (overflow_host_[i]) ops.insert(i);
  for (size_t k = 0; k < uploads_.size(); ++k) {
    if (!overflow_host_[ops_.size() + k]) continue;
    for (size_t i = 0; i < ops_.size(); ++i)
      if (!absorbed_[i] &&
          std::count(ops_[i]->inputs().begin(), ops_[i]->inputs().end(), uploads_[k]))
        ops.insert(i);
  }
  return {ops.begin(), ops.end()};
}

bool Partition::HandleOverflow() {
  if (!overflow_watch_ ||
      std::none_of(overflow_host_.begin(), overflow_host_.end(), [](int32_t w) { return w; }))
    return false;
  if (host_->settings().fp16_fallback && !fp32_ops_.empty()) {
    // Those ops run in float32 from now on, this invoke again included (partition_storage.cc).
    RunInFloat32(OverflowOps());
    return true;
  }
  const std::vector<int> nodes = OverflowNodes();
  std::string names;
  for (int n : nodes) {
    for (const auto& op : ops_)
      if (op->node_index() == n) {
        names += (names.empty() ? "" : ", ") + std::string(op->type_name()) + " node " +
                 std::to_string(n);
        break;
      }
  }
  host_->CountFp16Overflow(nodes, false);
  // Said once per partition; the words are not read again (no cost from then on).
  Log(LogLevel::kWarning, "precision fp16: values past fp16's range (65504) were saturated in " +
                              names + " (partition " + std::to_string(id_) +
                              "); precision=\"auto\" would run these ops in float32");
  warned_overflow_ = true;
  overflow_watch_ = false;
  return false;
}

}  // namespace clgpu
