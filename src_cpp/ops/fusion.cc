#include "ops/fusion.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>

#include "graph/quant.h"
#include "ops/conv2d_selector.h"
#include "ops/int8_ops.h"
#include "ops/op.h"
#include "ops/squeeze.h"
#include "tflite/builtin.h"

namespace clgpu {

std::vector<ResidualFusion> FindResidualFusions(const GraphView& g,
                                                const std::vector<NodeInfo>& nodes,
                                                const std::set<int>& outputs) {
  std::map<int, size_t> producer;  // tensor -> position of the node writing it
  std::map<int, int> reads;        // tensor -> inputs of nodes that name it
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int t : nodes[i].outputs) producer[t] = i;
    for (int t : nodes[i].inputs) ++reads[t];
  }
  auto foldable_conv = [&](int t, size_t add) -> long {
    const auto p = producer.find(t);
    if (p == producer.end() || p->second >= add) return -1;
    const NodeInfo& c = nodes[p->second];
    if (c.op != tfl::kConv2d || !c.builtin_data || c.outputs.size() != 1) return -1;
    tfl::ConvParams params;
    std::memcpy(&params, c.builtin_data, sizeof params);
    // act(conv) + residual is not act(conv + residual) in float; an int8 conv's integers are
    // exact, its clamp applied before the ADD's arithmetic as the CPU does.
    if (params.activation != tfl::kActNone && g.type(t) == kTfLiteFloat32) return -1;
    if (reads[t] != 1 || outputs.count(t)) return -1;
    return static_cast<long>(p->second);
  };
  std::vector<ResidualFusion> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInfo& n = nodes[i];
    if (n.op != tfl::kAdd || n.inputs.size() != 2 || n.outputs.size() != 1) continue;
    const int a = n.inputs[0], b = n.inputs[1];
    if (a == b || !g.valid_tensor(a) || !g.valid_tensor(b) || !g.valid_tensor(n.outputs[0]))
      continue;
    // Float, or int8 (the int8 GEMMs apply the ADD's integer arithmetic).
    const TfLiteType type = g.type(a);
    if ((type != kTfLiteFloat32 && type != kTfLiteInt8) || g.type(b) != type ||
        g.type(n.outputs[0]) != type)
      continue;
    const Shape sa = g.shape(a);
    if (sa != g.shape(b) || sa != g.shape(n.outputs[0])) continue;  // no broadcast
    ResidualFusion best;
    long best_at = -1;
    for (int k = 0; k < 2; ++k) {
      const int y = k ? b : a, r = k ? a : b;
      const long at = foldable_conv(y, i);
      if (at < 0 || at <= best_at) continue;
      // The residual must exist when the conv runs, not only when the ADD does.
      const auto rp = producer.find(r);
      if (rp != producer.end() && static_cast<long>(rp->second) >= at) continue;
      best = ResidualFusion{static_cast<size_t>(at), i, r};
      best_at = at;
    }
    if (best_at >= 0) out.push_back(best);
  }
  return out;
}

namespace {

// The epilogue number of a unary node, or 0.
int UnaryEpilogue(const NodeInfo& n, float* alpha) {
  *alpha = 0;
  switch (n.op) {
    case tfl::kHardSwish:
      return 2;
    case tfl::kLogistic:
      return 3;
    case tfl::kTanh:
      return 4;
    case tfl::kElu:
      return 7;
    case tfl::kGelu: {
      if (!n.builtin_data) return 0;
      bool approximate = false;
      std::memcpy(&approximate, n.builtin_data, sizeof approximate);
      return approximate ? 6 : 5;
    }
    case tfl::kLeakyRelu:
      if (!n.builtin_data) return 0;
      std::memcpy(alpha, n.builtin_data, sizeof *alpha);
      return 8;
    default:
      return 0;
  }
}

// Swish after the output y of nodes[p]: its two readers `r` are s = LOGISTIC(y) and MUL(y, s)
// (either operand order), both after p, s read by the MUL alone and not a partition output.
// Sets the positions of the LOGISTIC and the MUL; false if `r` is not that pair.
bool SwishReaders(const std::vector<NodeInfo>& nodes, size_t p, const std::vector<size_t>& r,
                  const std::set<int>& outputs, std::map<int, std::vector<size_t>>& readers,
                  size_t* li, size_t* mi) {
  if (r.size() != 2) return false;
  *li = r[0], *mi = r[1];
  if (nodes[*li].op != tfl::kLogistic) std::swap(*li, *mi);
  const NodeInfo &l = nodes[*li], &m = nodes[*mi];
  if (*li <= p || *mi <= *li || l.op != tfl::kLogistic || m.op != tfl::kMul ||
      l.inputs.size() != 1 || l.outputs.size() != 1 || m.outputs.size() != 1 || !m.builtin_data)
    return false;
  const int y = nodes[p].outputs[0], s = l.outputs[0];
  return (m.inputs == std::vector<int>{y, s} || m.inputs == std::vector<int>{s, y}) &&
         readers[s].size() == 1 && !outputs.count(s);
}

// The int8 form: after a quantized producer's output y, a table-able element-wise op that alone
// reads y, or swish (LOGISTIC(y) and MUL(y, s) its only readers), as one table of y's integers.
bool FindInt8Epilogue(const GraphView& g, const std::vector<NodeInfo>& nodes, size_t p,
                      const std::vector<size_t>& r, const std::set<int>& outputs,
                      std::map<int, std::vector<size_t>>& readers, EpilogueFusion* f) {
  const int y = nodes[p].outputs[0];
  f->kind = kTableEpilogue;
  f->intermediates = {y};
  if (r.size() == 1) {
    const NodeInfo& u = nodes[r[0]];
    if (r[0] <= p || u.inputs.size() != 1 || u.outputs.size() != 1 ||
        !Int8UnaryTable(g, u, &f->table).empty())
      return false;
    f->absorbed = {r[0]};
    f->output = u.outputs[0];
    return true;
  }
  size_t li = 0, mi = 0;
  if (!SwishReaders(nodes, p, r, outputs, readers, &li, &mi)) return false;
  const NodeInfo &l = nodes[li], &m = nodes[mi];
  const int s = l.outputs[0];
  std::vector<uint8_t> logistic;
  if (!Int8UnaryTable(g, l, &logistic).empty() ||
      !Int8MulTable(g, m, y, logistic, &f->table).empty())
    return false;
  f->absorbed = {li, mi};
  f->intermediates.push_back(s);
  f->output = m.outputs[0];
  return true;
}

}  // namespace

// nodes[i] as a post clamp of tensor t: MAXIMUM or MINIMUM of t and a constant float32 scalar,
// its output float32 of t's shape.
bool AsPostClamp(const GraphView& g, const NodeInfo& n, int t, PostClamp* c) {
  if ((n.op != tfl::kMaximum && n.op != tfl::kMinimum) || n.inputs.size() != 2 ||
      n.outputs.size() != 1)
    return false;
  const bool first = n.inputs[0] == t;
  const int k = first ? n.inputs[1] : n.inputs[0];
  if ((!first && n.inputs[1] != t) || k == t || !g.valid_tensor(k) || !g.IsConstant(k) ||
      g.type(k) != kTfLiteFloat32 || NumElements(g.shape(k)) != 1)
    return false;
  const int y = n.outputs[0];
  if (!g.valid_tensor(y) || g.type(y) != kTfLiteFloat32 || g.shape(y) != g.shape(t)) return false;
  const std::vector<float> v = g.ConstantFloats(k);
  if (v.size() != 1) return false;
  *c = PostClamp{n.op == tfl::kMaximum, v[0], first};
  return true;
}

// Extends `f` (its chain ending at f.output, or at `t` before any unary op when f.kind is 0)
// with the MAXIMUM / MINIMUM of a constant that follow, each its input's only reader.
void AddPostClamps(const GraphView& g, const std::vector<NodeInfo>& nodes, size_t last, int t,
                   const std::set<int>& outputs, std::map<int, std::vector<size_t>>& readers,
                   EpilogueFusion* f) {
  while (f->post.size() < kMaxPostClamps && !outputs.count(t)) {
    const std::vector<size_t>& r = readers[t];
    PostClamp c;
    if (r.size() != 1 || r[0] <= last || !AsPostClamp(g, nodes[r[0]], t, &c)) return;
    if (f->kind == 0) f->kind = kIdentityEpilogue;
    // The value the clamp reads is no longer written (the producer's own output is listed).
    if (f->intermediates.empty() || f->intermediates.back() != t) f->intermediates.push_back(t);
    f->post.push_back(c);
    f->absorbed.push_back(r[0]);
    last = r[0];
    t = f->output = nodes[last].outputs[0];
  }
}

std::vector<EpilogueFusion> FindEpilogueFusions(const GraphView& g,
                                                const std::vector<NodeInfo>& nodes,
                                                const std::set<int>& outputs) {
  std::map<int, std::vector<size_t>> readers;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (int t : nodes[i].inputs) readers[t].push_back(i);
  auto float_same = [&](int a, int b) {
    return g.valid_tensor(a) && g.valid_tensor(b) && g.type(a) == kTfLiteFloat32 &&
           g.type(b) == kTfLiteFloat32 && g.shape(a) == g.shape(b);
  };
  std::vector<EpilogueFusion> out;
  for (size_t p = 0; p < nodes.size(); ++p) {
    const NodeInfo& prod = nodes[p];
    const OpHandler* h = FindOpHandler(prod.op);
    if (!h || !h->clamp_epilogue || prod.outputs.size() != 1) continue;
    const int y = prod.outputs[0];
    if (outputs.count(y)) continue;
    const std::vector<size_t>& r = readers[y];
    EpilogueFusion f;
    f.producer = p;
    if (g.valid_tensor(y) && IsQuantized(g.value_type(y))) {
      if (FindInt8Epilogue(g, nodes, p, r, outputs, readers, &f)) out.push_back(std::move(f));
      continue;
    }
    if (r.size() == 1) {
      // Through RESHAPEs and their kin (the same elements in the same order): the producer
      // writes its elements, activated, where the unary op's output is.
      size_t at = r[0];
      int t = y;
      f.intermediates = {y};
      bool ok = at > p;
      while (ok && FindOpHandler(nodes[at].op) && FindOpHandler(nodes[at].op)->flat_copy &&
             nodes[at].outputs.size() == 1) {
        t = nodes[at].outputs[0];
        const std::vector<size_t>& next = readers[t];
        ok = !outputs.count(t) && next.size() == 1 && next[0] > at;
        if (!ok) break;
        f.absorbed.push_back(at);
        f.intermediates.push_back(t);
        at = next[0];
      }
      if (!ok) continue;
      const NodeInfo& u = nodes[at];
      const bool unary = u.inputs.size() == 1 && u.outputs.size() == 1 && u.inputs[0] == t;
      f.kind = unary ? UnaryEpilogue(u, &f.alpha) : 0;
      if (f.kind) {
        if (!g.valid_tensor(t) || !float_same(t, u.outputs[0])) continue;
        f.copies = !f.absorbed.empty();
        f.absorbed.push_back(at);
        f.output = u.outputs[0];
        AddPostClamps(g, nodes, at, f.output, outputs, readers, &f);
      } else {
        // No unary op: clamps by MAXIMUM / MINIMUM alone, straight after the producer.
        if (!f.absorbed.empty() || !g.valid_tensor(y) || g.type(y) != kTfLiteFloat32) continue;
        AddPostClamps(g, nodes, p, y, outputs, readers, &f);
        if (f.post.empty()) continue;
      }
    } else if (r.size() == 2) {
      // swish: s = LOGISTIC(y), z = MUL(y, s) with no activation.
      size_t li = 0, mi = 0;
      if (!SwishReaders(nodes, p, r, outputs, readers, &li, &mi)) continue;
      const NodeInfo& m = nodes[mi];
      const int s = nodes[li].outputs[0];
      int act = 0;
      std::memcpy(&act, m.builtin_data, sizeof act);
      if (act != 0 || !float_same(y, s) || !float_same(y, m.outputs[0])) continue;
      f.kind = 1;
      f.absorbed = {li, mi};
      f.intermediates = {y, s};
      f.output = m.outputs[0];
      AddPostClamps(g, nodes, mi, f.output, outputs, readers, &f);
    } else {
      continue;
    }
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<ClampFusion> FindClampFusions(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                          const std::set<int>& outputs) {
  // The clamp activations as bounds: the fused-activation codes of the same clamps.
  auto bounds = [](int32_t op, float* lo, float* hi) {
    switch (op) {
      case tfl::kRelu:  // max(x, 0): +Inf stays, unlike a fused RELU's FLT_MAX bound
        return (*lo = 0.f, *hi = std::numeric_limits<float>::infinity(), true);
      case tfl::kRelu6:
        return ActivationRange(tfl::kActRelu6, lo, hi);
      case tfl::kReluN1To1:
        return ActivationRange(tfl::kActReluN1To1, lo, hi);
      case tfl::kRelu0To1:
        return (*lo = 0.f, *hi = 1.f, true);
      default:
        return false;
    }
  };
  std::map<int, size_t> producer;
  std::map<int, int> reads;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int t : nodes[i].outputs) producer[t] = i;
    for (int t : nodes[i].inputs) ++reads[t];
  }
  std::vector<ClampFusion> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInfo& n = nodes[i];
    ClampFusion f;
    if (n.inputs.size() != 1 || n.outputs.size() != 1 || !bounds(n.op, &f.lo, &f.hi)) continue;
    const int t = n.inputs[0];
    const auto p = producer.find(t);
    if (p == producer.end() || p->second >= i || reads[t] != 1 || outputs.count(t)) continue;
    const NodeInfo& prod = nodes[p->second];
    const OpHandler* h = FindOpHandler(prod.op);
    if (!h || !h->clamp_epilogue || prod.outputs.size() != 1) continue;
    if (!g.valid_tensor(n.outputs[0]) || g.shape(n.outputs[0]) != g.shape(t)) continue;
    f.producer = p->second;
    f.act = i;
    out.push_back(f);
  }
  return out;
}

std::vector<size_t> FindDepthwiseFolds(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                       const std::set<int>& outputs) {
  std::map<int, size_t> reader;
  std::map<int, int> reads;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (int t : nodes[i].inputs) ++reads[t], reader[t] = i;
  std::vector<size_t> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const NodeInfo& dw = nodes[i];
    if (dw.op != tfl::kDepthwiseConv2d || dw.inputs.size() < 2 || dw.outputs.size() != 1 ||
        !dw.builtin_data)
      continue;
    const int t = dw.outputs[0];
    if (reads[t] != 1 || outputs.count(t) || reader[t] <= i) continue;
    const NodeInfo& pw = nodes[reader[t]];
    if (pw.op != tfl::kConv2d || pw.inputs.size() < 2 || pw.inputs[0] != t || !pw.builtin_data)
      continue;
    tfl::ConvParams p;
    std::memcpy(&p, pw.builtin_data, sizeof p);
    const Shape x = g.shape(dw.inputs[0]), f = g.shape(pw.inputs[1]), df = g.shape(dw.inputs[1]);
    if (x.size() != 4 || f.size() != 4 || df.size() != 4 || f[1] != 1 || f[2] != 1 ||
        p.stride_height != 1 || p.stride_width != 1 || df[3] != x[3] || f[3] != x[3])
      continue;
    if (IsQuantized(g.value_type(t)) && x[3] % 4 != 0) continue;
    out.push_back(i);
  }
  return out;
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
    if (mean.op != tfl::kMean || mean.inputs.empty() || mean.outputs.size() != 1 ||
        !g.valid_tensor(mean.inputs[0]) || !g.valid_tensor(mean.outputs[0]))
      continue;
    const Shape x = g.shape(mean.inputs[0]);
    const bool int8 = IsQuantized(g.value_type(mean.inputs[0]));
    int64_t channels = NumElements(g.shape(mean.outputs[0]));
    if (x.size() != 4 || x[0] != 1 || channels != x[3] ||
        channels > (int8 ? kMaxSqueezeVector : kMaxFloatSqueezeVector))
      continue;
    int t = mean.outputs[0];
    size_t at = m;
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
      channels = n, t = dense.outputs[0], at = size_t(d);
      for (auto w = written_instead.find(t); w != written_instead.end();
           w = written_instead.find(t))
        t = w->second;
    }
  }
  return out;
}

std::vector<size_t> FindExpandFolds(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                    const std::set<int>& outputs,
                                    const std::vector<size_t>& depthwise, const DeviceInfo& dev) {
  std::map<int, int> reads, producer;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int t : nodes[i].inputs) ++reads[t];
    for (int t : nodes[i].outputs) producer[t] = int(i);
  }
  // Pointwise convolutions that take a depthwise themselves stay as they are.
  std::set<size_t> takes_depthwise;
  std::map<size_t, size_t> pointwise_of;  // depthwise -> the convolution folding it
  for (size_t d : depthwise)
    for (size_t j = d + 1; j < nodes.size(); ++j)
      if (!nodes[j].inputs.empty() && nodes[j].inputs[0] == nodes[d].outputs[0]) {
        takes_depthwise.insert(j);
        pointwise_of[d] = j;
      }
  std::vector<size_t> out;
  for (size_t d : depthwise) {
    const NodeInfo& dw = nodes[d];
    const int x = dw.inputs[0];
    auto p = producer.find(x);
    if (p == producer.end() || reads[x] != 1 || outputs.count(x) || !pointwise_of.count(d)) continue;
    const size_t e = size_t(p->second);
    const NodeInfo& ex = nodes[e];
    if (ex.op != tfl::kConv2d || takes_depthwise.count(e) || ex.inputs.size() < 2 ||
        ex.outputs.size() != 1 || !ex.builtin_data)
      continue;
    tfl::ConvParams cp;
    std::memcpy(&cp, ex.builtin_data, sizeof cp);
    const Shape xin = g.shape(ex.inputs[0]), f = g.shape(ex.inputs[1]);
    if (xin.size() != 4 || f.size() != 4 || f[1] != 1 || f[2] != 1 || f[3] != xin[3] ||
        cp.stride_height != 1 || cp.stride_width != 1)
      continue;
    if (IsQuantized(g.value_type(x)) && xin[3] % 4 != 0) continue;
    const std::optional<ConvGeometry> dg = GraphConvGeometry(g, dw);
    const std::optional<ConvGeometry> pg = GraphConvGeometry(g, nodes[pointwise_of[d]]);
    if (dg && pg && ExpandFoldPays(dev, *dg, xin[3], pg->oc)) out.push_back(e);
  }
  return out;
}

bool ExpandFoldPays(const DeviceInfo& dev, const ConvGeometry& dw, int ec, int oc) {
  const double tiles = std::ceil(oc / 32.0);
  const double fused = double(dw.n) * dw.oh * dw.ow * dw.c * dw.kh * dw.kw * ec * tiles;
  const double own = double(dw.n) * dw.h * dw.w * dw.c * ec;
  // Nominal rate as the cost model's default: 128 flops per compute unit and cycle.
  const double rate = std::max(dev.compute_units, 1) * std::max(dev.max_clock_mhz, 1) * 128e6;
  return 2 * (fused - own) <= 0.1 * rate * 6e-6;
}

}  // namespace clgpu
