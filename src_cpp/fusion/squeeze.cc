// Squeeze folds (ops/squeeze.h): the dense ops (FULLY_CONNECTED, or a 1x1 CONV_2D over a 1x1
// image) after a MEAN over one image's H and W run inside the MEAN's kernel: the MEAN's output,
// through RESHAPEs and their kin, read by one dense op alone, whose output (or what its folded
// epilogue or clamp writes instead) may feed one more the same way; within the squeeze's sizes at
// float32 or int8 storage; no tensor of it a partition output or kept in pieces. After the
// clamps and epilogues, whose folds the dense ops carry in. An AVERAGE_POOL_2D of one window over
// the image takes the MEAN's place, and a SOFTMAX over the last dense op's outputs folds too (a
// classifier's head: pool, FULLY_CONNECTED and SOFTMAX in one launch).
#include "ops/squeeze.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "fusion/pass.h"
#include "ops/op_handler.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// An AVERAGE_POOL_2D whose one window covers the whole image, with no activation: a MEAN over H
// and W as a keyword spotter's or DS-CNN's head writes it.
bool WholeImageAverage(const GraphView& g, const NodeInfo& n) {
  if (n.op != tfl::kAveragePool2d || !n.builtin_data || n.inputs.empty() || n.outputs.empty() ||
      !g.valid_tensor(n.inputs[0]) || !g.valid_tensor(n.outputs[0]))
    return false;
  tfl::PoolParams p;
  std::memcpy(&p, n.builtin_data, sizeof p);
  const Shape x = g.shape(n.inputs[0]), y = g.shape(n.outputs[0]);
  return x.size() == 4 && y.size() == 4 && y[1] == 1 && y[2] == 1 && p.activation == 0 &&
         p.filter_height >= x[1] && p.filter_width >= x[2] &&
         (p.padding == tfl::kPaddingValid || (p.filter_height == x[1] && p.filter_width == x[2]));
}

std::vector<size_t> FindSqueezeFolds(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                     const std::set<int>& outputs,
                                     const std::map<int, int>& written_instead,
                                     std::vector<size_t>* means) {
  std::map<int, std::vector<size_t>> readers;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (int t : nodes[i].inputs) readers[t].push_back(i);
  // The one later node reading t as its first input, past copies; -1 when t leaves the
  // partition or has other readers.
  auto next = [&](int t, size_t after) -> int {
    for (;;) {
      const std::vector<size_t>& r = readers[t];
      if (outputs.count(t) || r.size() != 1 || r[0] <= after) return -1;
      const NodeInfo& n = nodes[r[0]];
      const OpHandler* h = FindOpHandler(n.op);
      if (n.inputs.empty() || n.inputs[0] != t) return -1;
      if (!(h && h->flat_copy)) return int(r[0]);
      if (n.outputs.size() != 1) return -1;
      t = n.outputs[0], after = r[0];
    }
  };
  std::vector<size_t> out;
  for (size_t m = 0; m < nodes.size(); ++m) {
    const NodeInfo& mean = nodes[m];
    if ((mean.op != tfl::kMean && !WholeImageAverage(g, mean)) || mean.inputs.empty() ||
        mean.outputs.size() != 1 || !g.valid_tensor(mean.inputs[0]) ||
        !g.valid_tensor(mean.outputs[0]))
      continue;
    const Shape x = g.shape(mean.inputs[0]);
    const bool int8 = IsQuantized(g.value_type(mean.inputs[0]));
    int64_t channels = NumElements(g.shape(mean.outputs[0]));
    if (x.size() != 4 || x[0] != 1 || channels != x[3] ||
        channels > (int8 ? kMaxSqueezeVector : kMaxFloatSqueezeVector))
      continue;
    int t = mean.outputs[0];
    size_t at = m;
    bool folded = false;
    for (int layer = 0; layer < 2; ++layer) {
      const int d = next(t, at);
      if (d < 0) break;
      const NodeInfo& dense = nodes[size_t(d)];
      const bool fc = dense.op == tfl::kFullyConnected, conv = dense.op == tfl::kConv2d;
      if ((!fc && !conv) || dense.inputs.size() < 2 || dense.outputs.size() != 1 ||
          !g.valid_tensor(dense.inputs[1]) || !g.IsConstant(dense.inputs[1]))
        break;
      const Shape w = g.shape(dense.inputs[1]);
      const int64_t n = w.empty() ? 0 : w[0], k = NumElements(w) / std::max<int64_t>(n, 1);
      if (k != channels || (conv && (w.size() != 4 || w[1] != 1 || w[2] != 1)) ||
          !SqueezeDenseFits(int(n), int(k), int8 ? 1 : 4) || (!int8 && n > kMaxFloatSqueezeVector))
        break;
      out.push_back(size_t(d));
      if (means && layer == 0) means->push_back(m);
      channels = n, t = WrittenAs(written_instead, dense.outputs[0]), at = size_t(d);
      folded = true;
    }
    // A SOFTMAX over the last dense op's outputs, in the storage they have (a classifier's head).
    if (const int s = folded ? next(t, at) : -1; s >= 0) {
      const NodeInfo& sm = nodes[size_t(s)];
      if (sm.op == tfl::kSoftmax && sm.outputs.size() == 1 && g.valid_tensor(sm.outputs[0]) &&
          channels <= kMaxSqueezeSoftmax && NumElements(g.shape(sm.outputs[0])) == channels &&
          g.value_type(sm.outputs[0]) == (int8 ? ValueType::kInt8 : ValueType::kFloat) &&
          g.value_type(sm.inputs[0]) == g.value_type(sm.outputs[0]))
        out.push_back(size_t(s));
    }
  }
  return out;
}

class SqueezePass : public FusionPass {
 public:
  const char* name() const override { return "squeeze"; }
  void Find(const FoldGraph& g, Folds* folds) override {
    std::vector<size_t> means;
    for (size_t d : FindSqueezeFolds(g.g, g.nodes, g.outputs, folds->written_instead, &means))
      folds->folded.insert(d);
    folds->one_kernel.insert(means.begin(), means.end());
  }
  void Apply(FoldPlan& plan) override {
    auto next_op = [&](int t, std::vector<size_t>* absorbed, std::vector<int>* elided) {
      return NextOp(plan, t, absorbed, elided);
    };
    for (size_t i = 0; i < plan.size(); ++i) {
      Op& mean = plan.op(i);
      const FoldTarget* target = mean.fold_target();
      if (plan.absorbed(i) || !target || !mean.squeeze_dense().empty() ||
          mean.inputs().size() != 1 || mean.outputs().size() != 1)
        continue;
      const Shape& in = plan.shape(mean.inputs()[0]);
      const SqueezeType type =
          plan.split(mean.inputs()[0]) ? SqueezeType::kNone : target->TakesSqueeze(in);
      if (type == SqueezeType::kNone) continue;
      std::vector<size_t> absorbed;
      std::vector<int> elided;
      std::vector<Op*> dense;
      int channels = static_cast<int>(NumElements(plan.shape(mean.outputs()[0])));
      int t = mean.outputs()[0];
      for (int layer = 0; layer < 2; ++layer) {
        std::vector<size_t> a = absorbed;
        std::vector<int> e = elided;
        const int j = next_op(t, &a, &e);
        if (j < 0) break;
        Op& d = plan.op(size_t(j));
        FoldSource* source = d.fold_source();
        OpContext dctx = plan.Ctx(size_t(j));
        int n = 0;
        if (d.outputs().size() != 1 || !source) break;
        if (type == SqueezeType::kInt8) {
          Int8Dense form;
          if (!source->GetInt8Dense(dctx, {1, channels}, &form) ||
              !SqueezeDenseFits(form.w->n, form.w->kp))
            break;
          n = form.w->n;
        } else {
          FloatDense form;
          if (!source->GetFloatDense(dctx, {1, channels}, &form) ||
              !SqueezeDenseFits(form.n, form.k, dctx.storage_bytes) ||
              form.n > kMaxFloatSqueezeVector || form.k > kMaxFloatSqueezeVector)
            break;
          n = form.n;
        }
        absorbed = std::move(a), elided = std::move(e);
        absorbed.push_back(size_t(j));
        dense.push_back(&d);
        channels = n;
        t = d.outputs()[0];
      }
      if (dense.empty()) continue;
      // A SOFTMAX over the last one's outputs.
      Op* softmax = nullptr;
      {
        std::vector<size_t> a = absorbed;
        std::vector<int> e = elided;
        SqueezeSoftmax form;
        if (const int j = next_op(t, &a, &e); j >= 0) {
          Op& s = plan.op(size_t(j));
          OpContext sctx = plan.Ctx(size_t(j));
          if (s.outputs().size() == 1 && s.fold_source() &&
              s.fold_source()->GetSqueezeSoftmax(sctx, channels, type == SqueezeType::kInt8,
                                                 &form)) {
            absorbed = std::move(a), elided = std::move(e);
            absorbed.push_back(size_t(j));
            softmax = &s;
            t = s.outputs()[0];
          }
        }
      }
      if (!plan.SamePrecision(i, absorbed)) continue;
      AttachSqueeze(plan.attachments(i), dense, t, softmax);
      plan.SetOutShapes(i, {plan.shape(t)});
      for (size_t a : absorbed) plan.Absorb(a, i);
      for (int e : elided) plan.Elide(e);
    }
  }

 private:
  // The one op (not folded away) reading t, or -1 when none or several do, or t leaves the
  // partition or is too large for one buffer.
  static int OnlyReader(FoldPlan& plan, int t) {
    if (!plan.internal(t) || !plan.Fits(t)) return -1;
    int reader = -1;
    for (size_t j = 0; j < plan.size(); ++j) {
      if (plan.absorbed(j)) continue;
      const auto& in = plan.op(j).inputs();
      if (std::count(in.begin(), in.end(), t) == 0) continue;
      if (reader >= 0 || in.size() != 1) return -1;
      reader = static_cast<int>(j);
    }
    return reader;
  }
  // Follows t through flat copies to the op that is not one: its index, the copies and the
  // tensors passed on the way in `absorbed` and `elided`.
  static int NextOp(FoldPlan& plan, int t, std::vector<size_t>* absorbed,
                    std::vector<int>* elided) {
    for (;;) {
      const int j = OnlyReader(plan, t);
      if (j < 0) return -1;
      elided->push_back(t);
      const Op& op = plan.op(size_t(j));
      if (!op.IsFlatCopy()) return j;
      if (op.outputs().size() != 1) return -1;
      absorbed->push_back(size_t(j));
      t = op.outputs()[0];
    }
  }
};

}  // namespace

std::unique_ptr<FusionPass> MakeSqueezePass() { return std::make_unique<SqueezePass>(); }

}  // namespace clgpu
