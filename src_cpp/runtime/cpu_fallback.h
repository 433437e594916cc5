// The nodes a partition replaced, run by the host runtime's own CPU kernels: TFLite keeps a
// replaced node with its builtin registration (and the user data of its init), so the
// partition can call that registration's prepare and invoke itself. A partition does so while
// its programs build in the background (option cpu_warmup, runtime/partition.h).
//
// The tensors between those nodes (and their kernels' temporaries) have no memory in TFLite's
// arena, whose plan only counts the nodes of the execution plan: while the fallback runs they
// are custom-allocated views into one host arena of its own, placed by lifetime as the device
// plan places activations. Release() hands them back to TFLite as they were.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "runtime/tensor_room.h"
#include "tflite/abi.h"

namespace clgpu {

class CpuFallback {
 public:
  // The runtime's node lookup, as the delegate's context holds it during delegate Prepare
  // (kernel init): in a kernel's prepare and invoke the context's pointer is a stub that only
  // reports an error, while the function itself reads the node of context->impl_ at any time.
  using NodeLookup = TfLiteStatus (*)(TfLiteContext*, int, TfLiteNode**, TfLiteRegistration**);

  // `nodes`: the replaced nodes in execution order; `boundary`: the partition's inputs and
  // outputs (TFLite's arena holds them); `shape_nodes`: those the partition folded as shape
  // computations (ops/shape_folding.h), values of shapes and constants only. Node pointers are
  // looked up at each use: the node list moves when nodes are added (another partition, a
  // later delegate). `room`: the context's room for new tensors, kept before each kernel's
  // prepare (runtime/tensor_room.h); it outlives this.
  CpuFallback(NodeLookup lookup, TensorRoom* room, std::vector<int> nodes, std::set<int> boundary,
              std::set<int> shape_nodes);
  ~CpuFallback() { Release(ctx_); }  // kernels are freed before the tensors are
  CpuFallback(const CpuFallback&) = delete;
  CpuFallback& operator=(const CpuFallback&) = delete;

  // Prepares every node's CPU kernel for the current shapes and backs the tensors between
  // them. A shape node runs here, once per prepare, into a persistent tensor, as TFLite's
  // SHAPE kernel does: the RESHAPE or TRANSPOSE_CONV reading it then sizes its output at
  // prepare (a computed target would make it dynamic, sized only at invoke). "" when it can run
  // them, else why not (a custom op the runtime did not resolve, a kernel that failed to prepare or
  // sizes its output only at invoke); then nothing is backed.
  std::string Prepare(TfLiteContext* ctx);
  // Runs the nodes in order from position `from` (0: a new invoke); throws Error naming the
  // node whose kernel failed. Before node k it asks `stop(k)` (if given) and, on true, returns
  // k, the first node not run (the outputs of those before it hold their values, so a later
  // call can go on from there); size() when all ran.
  size_t Invoke(TfLiteContext* ctx, const std::function<bool(size_t)>& stop = {}, size_t from = 0);
  size_t size() const { return nodes_.size(); }
  // How long nodes k.. took in the last run that ran them all (ms); negative before one did.
  double RemainingMs(size_t k) const;
  // The backed tensors back to their own allocation type, without memory (what TFLite gave
  // them), and the arena freed.
  void Release(TfLiteContext* ctx);

 private:
  struct Backed {
    int tensor;
    TfLiteAllocationType type;  // what TFLite had given it
    size_t offset, bytes;
  };
  // A shape node's output while prepared: a constant over `copy`; `own` is TFLite's buffer.
  struct Pinned {
    int tensor;
    void* own;
    std::unique_ptr<uint8_t[]> copy;
  };
  class KeepBoundary;
  void Bind(TfLiteContext* ctx) const;
  void NodeAt(TfLiteContext* ctx, size_t k, TfLiteNode** node, TfLiteRegistration** reg) const;
  std::string PrepareNode(TfLiteContext* ctx, size_t k);

  TfLiteContext* ctx_ = nullptr;  // of the last prepare
  NodeLookup lookup_;
  TensorRoom* room_;
  std::vector<int> nodes_;
  std::set<int> boundary_;
  std::set<int> shape_nodes_;
  std::vector<bool> ran_at_prepare_;            // per position in nodes_
  std::vector<double> node_ms_, last_node_ms_;  // per position: this run's, the last whole run's
  std::vector<Backed> backed_;
  std::vector<Pinned> pinned_;
  std::vector<int> heap_temporaries_;  // kernels' temporaries in TFLite's heap memory
  std::unique_ptr<uint8_t[]> storage_;
  uint8_t* arena_ = nullptr;  // storage_, aligned
  bool prepared_ = false;
};

}  // namespace clgpu
