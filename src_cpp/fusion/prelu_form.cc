// Recognising a PRELU written as element-wise ops (fusion/prelu_form.h).
#include "fusion/prelu_form.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr size_t kMaxFormNodes = 8;   // litert-torch's form has 4
constexpr size_t kMaxLookahead = 32;  // positions after the producer a member may be at

// p * relu(x) + q * relu(-x), each coefficient one value or one per channel.
struct Combo {
  std::vector<float> p, q;
};

float At(const std::vector<float>& v, size_t c) { return v.size() == 1 ? v[0] : v[c]; }

template <typename F>
std::vector<float> Zip(const std::vector<float>& a, const std::vector<float>& b, F f) {
  std::vector<float> out(std::max(a.size(), b.size()));
  for (size_t c = 0; c < out.size(); ++c) out[c] = f(At(a, c), At(b, c));
  return out;
}

template <typename F>
Combo Both(const Combo& a, const Combo& b, F f) {
  return Combo{Zip(a.p, b.p, f), Zip(a.q, b.q, f)};
}

Combo Relu(const Combo& a) {
  auto r = [](float u, float) { return std::max(u, 0.0f); };
  return Both(a, a, r);
}

// A float constant of one value or one per channel (shaped as ones, then the channels).
bool ChannelConstant(const GraphView& g, int t, int channels, std::vector<float>* v) {
  if (!g.valid_tensor(t) || !g.IsConstant(t) || g.type(t) != kTfLiteFloat32) return false;
  const Shape s = g.shape(t);
  const int64_t n = NumElements(s);
  if (n != 1 && !PerChannelShape(s, channels)) return false;
  *v = g.ConstantFloats(t);
  if (int64_t(v->size()) != n) return false;
  for (float x : *v)
    if (!std::isfinite(x)) return false;
  return true;
}

// The value node n writes, from the values of the members it reads; false if n is not one of
// the form's ops. `constant`: a per-channel operand it multiplies by, if any, and its values.
bool Evaluate(const GraphView& g, const NodeInfo& n, const std::map<int, Combo>& val, int channels,
              Combo* out, std::pair<int, std::vector<float>>* constant) {
  auto member = [&](int t) { return val.find(t); };
  int act = tfl::kActNone;
  if ((n.op == tfl::kMul || n.op == tfl::kAdd || n.op == tfl::kSub) && n.builtin_data)
    std::memcpy(&act, n.builtin_data, sizeof act);
  if (act != tfl::kActNone && act != tfl::kActRelu) return false;
  const auto a = member(n.inputs.empty() ? -1 : n.inputs[0]);
  if (n.op == tfl::kRelu || n.op == tfl::kNeg) {
    if (n.inputs.size() != 1 || a == val.end()) return false;
    if (n.op == tfl::kRelu)
      *out = Relu(a->second);
    else
      *out = Both(a->second, a->second, [](float u, float) { return -u; });
    return true;
  }
  if (n.inputs.size() != 2) return false;
  const auto b = member(n.inputs[1]);
  if (a != val.end() && b != val.end()) {
    switch (n.op) {
      case tfl::kAdd:
        *out = Both(a->second, b->second, [](float u, float v) { return u + v; });
        break;
      case tfl::kSub:
        *out = Both(a->second, b->second, [](float u, float v) { return u - v; });
        break;
      case tfl::kMaximum:
        *out = Both(a->second, b->second, [](float u, float v) { return std::max(u, v); });
        break;
      case tfl::kMinimum:
        *out = Both(a->second, b->second, [](float u, float v) { return std::min(u, v); });
        break;
      default:
        return false;
    }
  } else if (a != val.end() || b != val.end()) {
    const Combo& m = a != val.end() ? a->second : b->second;
    const int k = a != val.end() ? n.inputs[1] : n.inputs[0];
    std::vector<float> v;
    if (!ChannelConstant(g, k, channels, &v)) return false;
    if (n.op == tfl::kMul) {
      *out = Combo{Zip(m.p, v, [](float u, float w) { return u * w; }),
                   Zip(m.q, v, [](float u, float w) { return u * w; })};
      if (v.size() > 1) *constant = {k, v};
    } else if (n.op == tfl::kMaximum || n.op == tfl::kMinimum) {
      // Against zero only: a non-zero bound is no longer a function of the two parts.
      if (std::any_of(v.begin(), v.end(), [](float w) { return w != 0.0f; })) return false;
      const Combo zero{{0.0f}, {0.0f}};
      *out = n.op == tfl::kMaximum ? Both(m, zero, [](float u, float w) { return std::max(u, w); })
                                   : Both(m, zero, [](float u, float w) { return std::min(u, w); });
    } else {
      return false;
    }
  } else {
    return false;
  }
  if (act == tfl::kActRelu) *out = Relu(*out);
  return true;
}

// Whether members[0..] close on the last: x and every member's output but the last are read
// by members alone and are no partition output.
bool Closed(const std::vector<size_t>& members, const std::vector<NodeInfo>& nodes, int x,
            const std::map<int, std::vector<size_t>>& readers, const std::set<int>& outputs) {
  auto inside = [&](int t) {
    if (outputs.count(t)) return false;
    const auto r = readers.find(t);
    if (r == readers.end()) return false;
    for (size_t i : r->second)
      if (std::find(members.begin(), members.end(), i) == members.end()) return false;
    return true;
  };
  if (!inside(x)) return false;
  for (size_t k = 0; k + 1 < members.size(); ++k)
    if (!inside(nodes[members[k]].outputs[0])) return false;
  return true;
}

}  // namespace

std::optional<PreluForm> FindPreluForm(const GraphView& g, const std::vector<NodeInfo>& nodes,
                                       size_t p, const std::map<int, std::vector<size_t>>& readers,
                                       const std::set<int>& outputs) {
  if (nodes[p].outputs.size() != 1) return std::nullopt;
  const int x = nodes[p].outputs[0];
  const auto xr = readers.find(x);
  if (!g.valid_tensor(x) || g.type(x) != kTfLiteFloat32 || outputs.count(x) ||
      xr == readers.end() || xr->second.size() < 2)
    return std::nullopt;
  const Shape shape = g.shape(x);
  if (shape.empty() || shape.back() <= 0) return std::nullopt;
  const int channels = shape.back();
  std::map<int, Combo> val{{x, Combo{{1.0f}, {-1.0f}}}};
  std::vector<size_t> members;
  std::vector<std::pair<int, std::vector<float>>> constants;  // per-channel MUL operands
  std::optional<PreluForm> best;
  for (size_t i = p + 1; i < nodes.size() && i <= p + kMaxLookahead; ++i) {
    const NodeInfo& n = nodes[i];
    if (std::none_of(n.inputs.begin(), n.inputs.end(), [&](int t) { return val.count(t); }))
      continue;
    Combo c;
    std::pair<int, std::vector<float>> constant{-1, {}};
    if (members.size() == kMaxFormNodes || n.outputs.size() != 1 || !g.valid_tensor(n.outputs[0]) ||
        g.type(n.outputs[0]) != kTfLiteFloat32 || g.shape(n.outputs[0]) != shape ||
        !Evaluate(g, n, val, channels, &c, &constant))
      break;  // what reads the form from here on is outside it
    members.push_back(i);
    val[n.outputs[0]] = c;
    if (constant.first >= 0) constants.push_back(std::move(constant));
    const bool prelu = std::all_of(c.p.begin(), c.p.end(), [](float u) { return u == 1.0f; });
    if (members.size() < 2 || !prelu || !Closed(members, nodes, x, readers, outputs)) continue;
    PreluForm f;
    f.nodes = members;
    f.intermediates = {x};
    for (size_t k = 0; k + 1 < members.size(); ++k)
      f.intermediates.push_back(nodes[members[k]].outputs[0]);
    f.output = n.outputs[0];
    for (float q : c.q) f.slopes.push_back(-q);
    if (std::all_of(f.slopes.begin(), f.slopes.end(), [&](float s) { return s == f.slopes[0]; }))
      f.slopes.resize(1);
    for (const auto& [k, v] : constants)
      if (f.slopes.size() > 1 && v == f.slopes) f.slopes_tensor = k;
    best = std::move(f);
  }
  return best;
}

}  // namespace clgpu
