// Per-op precision under precision auto (runtime/partition.h): an op whose values leave fp16's
// range runs on its float32 twin, the others stay fp16. A value is stored as the op writing it
// runs (a partition input: float32 once any reader is), and where a reader's storage differs from
// its input's, a conversion is the reader's first step (a constant: a float32 copy uploaded once).
// A float->half conversion notes saturation in its reader's word, so that reader follows next.
#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "cl/errors.h"
#include "common/log.h"
#include "runtime/partition.h"

namespace clgpu {

OpContext Partition::StorageCtx(const OpContext& octx, size_t i) const {
  return Fp32(i) ? octx.WithFloat32Storage() : octx;
}

void Partition::Absorb(size_t op, size_t into) {
  absorbed_.at(op) = true;
  folded_into_.at(op) = static_cast<int>(into);
}

bool Partition::SamePrecision(size_t op, const std::vector<size_t>& others) const {
  return std::all_of(others.begin(), others.end(), [&](size_t o) { return Fp32(o) == Fp32(op); });
}

std::vector<size_t> Partition::GroupOf(size_t op) const {
  std::vector<size_t> group{op};
  for (size_t j = 0; j < folded_into_.size(); ++j) {
    // Folds nest (an epilogue's op folded into a conv later): follow j's absorbers up.
    int k = folded_into_[j];
    for (size_t hops = 0; k >= 0 && size_t(k) != op && hops < ops_.size(); ++hops)
      k = folded_into_[size_t(k)];
    if (k >= 0 && size_t(k) == op) group.push_back(j);
  }
  return group;
}

void Partition::AssignStorage() {
  if (!half_ || fp32_.empty()) return;  // every value half (the default)
  std::map<int, bool> half_reader, fp32_reader;
  std::map<int, size_t> producer;
  for (size_t i = 0; i < ops_.size(); ++i) {
    for (int t : ops_[i]->inputs()) (Fp32(i) ? fp32_reader : half_reader)[t] = true;
    for (int t : ops_[i]->outputs()) producer[t] = i;
  }
  for (auto& [t, v] : values_) {
    if (v.type != ValueType::kFloat) continue;
    bool half = true;
    if (v.kind == Kind::kConstant) {
      // Float32 only where no fp16 op reads it; else fp32 readers get a float32 copy.
      half = !fp32_reader.count(t) || half_reader.count(t);
    } else if (v.kind == Kind::kInput) {
      half = !fp32_reader.count(t);  // transferred as float32 anyway: no conversion for them
    } else if (const auto p = producer.find(t); p != producer.end()) {
      half = !Fp32(p->second);
    }
    if (v.kind == Kind::kConstant && half != v.half) {
      v.buffer.Release();  // uploaded again in its new type
      v.pieces.clear();
      v.piece_buffers.clear();
    }
    v.half = half;
  }
}

bool Partition::PlanConversions(const OpContext& octx) {
  conversions_.clear();
  if (!half_ || fp32_.empty()) return true;
  for (size_t i = 0; i < ops_.size(); ++i) {
    if (RunsNothing(i)) continue;
    const bool half = !Fp32(i);
    for (size_t j = 0; j < ops_[i]->inputs().size(); ++j) {
      const int t = ops_[i]->inputs()[j];
      const Value& v = values_.at(Root(t));
      const size_t n = static_cast<size_t>(NumElements(v.shape));
      if (values_.at(t).type != ValueType::kFloat || v.half == half || n == 0 || ConversionOf(i, j))
        continue;
      // Not in pieces nor in chunks: those copy boxes in one element type.
      if (v.split() || !runs_.at(i).plan.empty() || n * (half ? 2 : 4) > octx.max_alloc)
        return false;
      Conversion c;
      c.op = i, c.value = t;
      if (v.kind == Kind::kConstant) {
        OpContext float32 = octx.WithFloat32Storage();
        c.buffer = UploadWeights(float32, v.constant);
      } else {
        c.buffer = host_->env().CreateBuffer(n * (half ? 2 : 4));
      }
      report_.staging_bytes += c.buffer.bytes();
      conversions_.push_back(std::move(c));
    }
  }
  return true;
}

// After the ops prepared: each conversion's kernel, first among its reader's steps.
void Partition::BindConversions(const OpContext& octx) {
  if (conversions_.empty()) return;
  OpContext c16 = octx;  // the delegate's fp16 storage: to_storage saturates into a word
  auto prog = c16.GetProgram("convert");
  for (Conversion& c : conversions_) {
    const int t = c.value;
    const Value& v = values_.at(Root(t));
    if (v.kind == Kind::kConstant) continue;
    c.launch.name = Fp32(c.op) ? "from_storage" : "to_storage";
    c.launch.kernel = CreateKernel(*prog, c.launch.name);
    const size_t n = static_cast<size_t>(NumElements(v.shape));
    SetArgs(c.launch.kernel, Mem(t), c.buffer.get(), static_cast<int>(n), cl_long{0});
    c.launch.global[0] = n;
    std::vector<Step>& steps = runs_.at(c.op).steps;
    steps.insert(steps.begin(), Step{&c.launch, {}, nullptr, ops_[c.op].get()});
  }
}

const Partition::Conversion* Partition::ConversionOf(size_t op, size_t input) const {
  const int t = ops_[op]->inputs().at(input);
  for (const Conversion& c : conversions_)
    if (c.op == op && c.value == t) return &c;
  return nullptr;
}

cl_mem Partition::InputMem(size_t op, size_t input) const {
  const Conversion* c = ConversionOf(op, input);
  return c ? c->buffer.get() : Mem(ops_[op]->inputs()[input]);
}

Storage Partition::InputStorage(size_t op, size_t input) const {
  const int t = ops_[op]->inputs()[input];
  const Conversion* c = ConversionOf(op, input);
  if (!c) return StorageOf(t);
  return Storage{{c->buffer.get()}, {Piece{0, size_t(NumElements(values_.at(t).shape))}}, {}};
}

size_t Partition::InputElemBytes(size_t op, size_t input) const {
  if (!ConversionOf(op, input)) return ElemBytes(ops_[op]->inputs()[input]);
  return Fp32(op) ? 4 : 2;
}

void Partition::RunInFloat32(std::vector<size_t> ops) {
  std::set<size_t> add;
  for (size_t i : ops)
    for (size_t j : GroupOf(i))
      if (!Fp32(j)) add.insert(j);
  if (add.empty())  // nothing left to move but still past the range: all of it, to be sure
    for (size_t i = 0; i < ops_.size(); ++i)
      if (!Fp32(i)) add.insert(i);
  // Kernels go before the ops and buffers they use; folds (which hold other ops) are dropped.
  ReleaseLaunches();
  FreshAttachments();
  runs_.clear();
  conversions_.clear();
  fp32_.resize(ops_.size(), false);
  std::vector<int> nodes;
  std::string names;
  for (size_t i : add) {
    ops_[i].swap(fp32_ops_.at(i));
    fp32_ops_[i].reset();  // the fp16 op and its weights
    fp32_[i] = true;
    nodes.push_back(ops_[i]->node_index());
    names += (names.empty() ? "" : ", ") + std::string(ops_[i]->type_name()) + " node " +
             std::to_string(nodes.back());
  }
  host_->CountFp16Overflow(nodes, true);
  const bool all = std::all_of(fp32_.begin(), fp32_.end(), [](bool b) { return b; });
  Log(LogLevel::kInfo, "precision auto: " + names + " (partition " + std::to_string(id_) +
                           ") run in float32 from now on: values past fp16's range" +
                           (all ? "; the whole partition does" : ""));
  if (all) {
    // Float32 storage throughout, as precision fp32 (constants uploaded again, no words read).
    for (auto& [t, v] : values_) {
      if (v.kind != Kind::kConstant) continue;
      v.buffer.Release();
      v.pieces.clear();
      v.piece_buffers.clear();
    }
    half_ = false;
    overflow_watch_ = false;
    overflow_host_.clear();
  }
  overflow_flag_.Release();  // the words set: Bind fills a new one with zeros
  device_planned_ = bound_ = false;
}

}  // namespace clgpu
