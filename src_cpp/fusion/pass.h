// Folds as passes: each fold of an op into another's kernel (a clamp, an epilogue, a residual
// ADD, per-channel PRELU slopes, a QUANTIZE after a DEQUANTIZE, views, a squeeze, a gate, a
// depthwise, an expand, a pool, a chain of data movement, a concatenation) is one file here, with a
// graph-level Find that the cost model and the partition both use and an Apply that decides per
// plan, with the plan's shapes and ops, what actually folds. FusionPasses() is the one ordered
// table of them; option `fuse` names its entries. Between ops/ (what an op can take) and runtime/
// (which implements FoldPlan). A pass records what folds in the ops' Attachments, through
// fusion/attach.h.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cl/device.h"
#include "fusion/attach.h"
#include "graph/graph.h"
#include "ops/conv_geometry.h"
#include "ops/op.h"

namespace clgpu {

// One partition's nodes in execution order, as the cost model and the partition see them.
struct FoldGraph {
  const GraphView& g;
  const std::vector<NodeInfo>& nodes;
  const std::set<int>& outputs;  // the partition's outputs
  const DeviceInfo& dev;
};

// What the passes found on the graph, accumulated in table order (the cost model's count of
// kernels; later passes read what earlier ones wrote).
struct Folds {
  std::set<size_t> folded;                // nodes that run no kernel of their own
  std::map<size_t, size_t> depthwise_of;  // a 1x1 CONV_2D -> the depthwise it computes
  std::map<size_t, size_t> expand_of;     // a depthwise -> the expand computed inside it
  std::set<size_t> one_kernel;            // nodes whose folds make them one kernel
  std::map<int, int> written_instead;     // a producer's output -> what its folds write instead
  std::map<int, int> pad_input;           // a folded PAD's output -> its input
  std::map<size_t, InputPad> pads;        // a convolution -> the PAD folded into it
  // A chain run in one fused launch by its last node (ds_chain, dense_chain) -> the chain's
  // device time in its form (us).
  std::map<size_t, double> chain_us;
};

// Who writes and who reads each tensor among a partition's nodes (indices into them; a node
// reading a tensor twice is listed twice).
struct TensorUses {
  explicit TensorUses(const std::vector<NodeInfo>& nodes);
  std::map<int, size_t> producer;
  std::map<int, std::vector<size_t>> readers;
};

// A clamp activation node (RELU, RELU6, RELU_N1_TO_1, RELU_0_TO_1).
bool IsClampOp(int32_t op);

// The tensor holding node i's first output once the clamps found so far fold into it (the
// output, or a folded clamp's after it, followed to its end); -1 where another fold writes it.
int ClampedOutput(const std::vector<NodeInfo>& nodes, const TensorUses& uses, const Folds& folds,
                  size_t i);
// Each such tensor's node, for the nodes of one output that are not clamps themselves.
std::map<int, size_t> ClampedWriters(const std::vector<NodeInfo>& nodes, const TensorUses& uses,
                                     const Folds& folds);

// The tensor that holds t's values once the folds found so far are applied: t, or what a
// producer's folded clamp or epilogue writes instead, followed to its end.
inline int WrittenAs(const std::map<int, int>& written_instead, int t) {
  for (auto w = written_instead.find(t); w != written_instead.end(); w = written_instead.find(t))
    t = w->second;
  return t;
}

// What a pass sees of one plan of a partition and may change (runtime/partition.h implements
// it): its ops in execution order, the values' shapes, which ops are folded into others.
class FoldPlan {
 public:
  virtual ~FoldPlan() = default;
  virtual size_t size() const = 0;  // ops
  virtual Op& op(size_t i) = 0;
  // What op i takes in this plan (fusion/attach.h fills it; fresh with each plan).
  virtual Attachments& attachments(size_t i) = 0;
  virtual bool absorbed(size_t i) const = 0;
  // Op `from` runs inside op `into` from now on: no kernel of its own this plan.
  virtual void Absorb(size_t from, size_t into) = 0;
  virtual const Shape& shape(int t) const = 0;
  // An activation between the partition's ops: not an input, a constant or a partition output.
  virtual bool internal(int t) const = 0;
  virtual bool split(int t) const = 0;    // kept in pieces (larger than one buffer)
  virtual size_t bytes(int t) const = 0;  // one element on the device
  virtual void Elide(int t) = 0;          // never written this plan
  // t kept in root's storage this plan: the first values of each of root's rows (a
  // concatenation chain; its readers told the pitch). Both whole, internal, one storage type.
  virtual void Alias(int t, int root) = 0;
  virtual void SetOutShapes(size_t i, std::vector<Shape> shapes) = 0;
  // Whether ops `others` keep their values in op i's storage type (precision auto).
  virtual bool SamePrecision(size_t i, const std::vector<size_t>& others) const = 0;
  virtual OpContext Ctx(size_t i) const = 0;         // op i's context
  virtual OpContext StorageCtx(size_t i) const = 0;  // op i's storage, the partition's options
  // Whether op i, reading inputs of these shapes, runs whole (not in chunks) in this plan.
  virtual bool RunsWhole(size_t i, const std::vector<Shape>& in) const = 0;
  virtual size_t max_alloc() const = 0;
  virtual size_t storage_bytes() const = 0;  // the partition's float storage, per element

  // Conveniences over the above.
  bool Fits(int t) const { return size_t(NumElements(shape(t))) * bytes(t) <= max_alloc(); }
  std::vector<Shape> InputShapes(size_t i) {
    std::vector<Shape> in;
    for (int t : op(i).inputs()) in.push_back(shape(t));
    return in;
  }
  // The op writing t and how many ops read it (folded ops aside): -1 when none writes it.
  int Producer(int t, int* readers);
};

class FusionPass {
 public:
  virtual ~FusionPass() = default;
  virtual const char* name() const = 0;
  // Before any pass's Find: the partition's nodes in an order that lets this pass fold more
  // (one TFLite's would allow too). Most passes keep the order they get.
  virtual void Order(const GraphView& /*g*/, std::vector<NodeInfo>* /*nodes*/,
                     const std::set<int>& /*outputs*/) {}
  // Graph level: what this pass may fold, kept for Apply and reported in *folds.
  virtual void Find(const FoldGraph& g, Folds* folds) = 0;
  // One plan: folds what the ops and this plan's shapes allow.
  virtual void Apply(FoldPlan& plan) = 0;
};

// The table, in the order the passes apply: affine, pad, clamp, epilogue, residual, views,
// squeeze, gate, ds_chain, depthwise, prelu, requantize, expand, pool, squeeze_tail, gathers,
// concat, concat_chain, dense_chain (each pass's file says what it needs of those before it).
std::vector<std::unique_ptr<FusionPass>> FusionPasses();
// Their names, in that order.
const std::vector<std::string>& FusionPassNames();

// The partition's nodes in the order the passes named in `fuse` want them (each pass's Order, in
// table order), before any Find: the cost model and the partition both call it, so both count
// the same folds.
void OrderForFolds(const GraphView& g, std::vector<NodeInfo>* nodes, const std::set<int>& outputs,
                   const std::vector<std::string>& fuse);

// n's geometry when it is a CONV_2D of one group that reads y once, as its input (the readers
// the affine and gate folds look for); else nothing.
std::optional<ConvGeometry> ConvReadingInput(const GraphView& g, const NodeInfo& n, int y);

// The passes' factories (one file each).
std::unique_ptr<FusionPass> MakeAffinePass();
std::unique_ptr<FusionPass> MakePadPass();
std::unique_ptr<FusionPass> MakeClampPass();
std::unique_ptr<FusionPass> MakeEpiloguePass();
std::unique_ptr<FusionPass> MakeResidualPass();
std::unique_ptr<FusionPass> MakePreluPass();
std::unique_ptr<FusionPass> MakeRequantizePass();
std::unique_ptr<FusionPass> MakeViewsPass();
std::unique_ptr<FusionPass> MakeSqueezePass();
std::unique_ptr<FusionPass> MakeGatePass();
std::unique_ptr<FusionPass> MakeDsChainPass();
std::unique_ptr<FusionPass> MakeDepthwisePass();
std::unique_ptr<FusionPass> MakeExpandPass();
std::unique_ptr<FusionPass> MakePoolPass();
std::unique_ptr<FusionPass> MakeSqueezeTailPass();
std::unique_ptr<FusionPass> MakeGathersPass();
std::unique_ptr<FusionPass> MakeConcatPass();
std::unique_ptr<FusionPass> MakeConcatChainPass();
std::unique_ptr<FusionPass> MakeDenseChainPass();

}  // namespace clgpu
