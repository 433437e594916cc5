// One plan's folds (runtime/partition.h): the partition as fusion/pass.h's FoldPlan, and the
// passes applied to it in the table's order. They fill the plan's attachments, which the next
// plan replaces with fresh ones (FreshAttachments).
#include <algorithm>

#include "runtime/partition.h"

namespace clgpu {

class Partition::Folding final : public FoldPlan {
 public:
  Folding(Partition& p, const OpContext& octx) : p_(p), octx_(octx) {}
  size_t size() const override { return p_.ops_.size(); }
  Op& op(size_t i) override { return *p_.ops_[i]; }
  Attachments& attachments(size_t i) override { return p_.attachments_[i]; }
  bool absorbed(size_t i) const override { return p_.absorbed_[i]; }
  void Absorb(size_t from, size_t into) override { p_.Absorb(from, into); }
  const Shape& shape(int t) const override { return p_.values_.at(t).shape; }
  bool internal(int t) const override {
    const Value& v = p_.values_.at(t);
    return !v.is_partition_output && v.kind == Kind::kInternal;
  }
  bool split(int t) const override { return p_.values_.at(t).split(); }
  size_t bytes(int t) const override { return p_.ElemBytes(t); }
  void Elide(int t) override { p_.values_.at(t).elided = true; }
  void Alias(int t, int root) override { p_.values_.at(t).alias = root; }
  void SetOutShapes(size_t i, std::vector<Shape> shapes) override {
    p_.out_shapes_[i] = std::move(shapes);
  }
  bool SamePrecision(size_t i, const std::vector<size_t>& others) const override {
    return p_.SamePrecision(i, others);
  }
  OpContext Ctx(size_t i) const override { return p_.OpCtx(octx_, i); }
  OpContext StorageCtx(size_t i) const override { return p_.StorageCtx(octx_, i); }
  bool RunsWhole(size_t i, const std::vector<Shape>& in) const override {
    ChunkPlan chunks;
    return PlanOpChunks(Ctx(i), *p_.ops_[i], in, p_.out_shapes_[i], octx_.max_alloc, &chunks)
               .empty() &&
           chunks.out.empty();
  }
  size_t max_alloc() const override { return octx_.max_alloc; }
  size_t storage_bytes() const override { return octx_.storage_bytes; }

 private:
  Partition& p_;
  const OpContext& octx_;
};

// Off with fuse_add, and with capture_tensors, which reads every tensor back.
void Partition::ApplyFolds(const OpContext& octx) {
  const RuntimeSettings& o = host_->settings();
  if (!o.fuse_add || o.capture_tensors) return;
  Folding plan(*this, octx);
  for (const auto& pass : passes_)
    if (std::find(o.fuse.begin(), o.fuse.end(), pass->name()) != o.fuse.end()) pass->Apply(plan);
}

}  // namespace clgpu
