// One delegated partition on the device. Built at kernel init (ops, weights);
// planned when input shapes change (shapes, memory plan, output resizes); bound
// when buffers change (kernel arguments); run at invoke with one transfer per
// boundary tensor, every kernel enqueued without host sync, and one clFinish.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "delegate/delegate.h"
#include "ops/op.h"

namespace clgpu {

class Partition {
 public:
  // Valid only inside delegate Prepare (kernel init): reads nodes and constants.
  Partition(TfLiteContext* ctx, const TfLiteDelegateParams* params);
  ~Partition();

  void Prepare(TfLiteContext* ctx);  // kernel prepare: re-plan if shapes changed
  void Invoke(TfLiteContext* ctx);

 private:
  enum class Kind { kInput, kConstant, kInternal, kOutput };
  struct Value {
    Kind kind = Kind::kInternal;
    bool is_partition_output = false;
    Shape shape;
    Buffer buffer;                // constants: own buffer; activations: a view into arena_ (or own)
    int slot = -1;                // index into shared_ when activations share whole buffers
    std::vector<float> constant;  // host copy of a constant
    // The float32 buffer TFLite's tensor is transferred through when it is not
    // `buffer` itself: a staging copy under fp16 storage, or a host-pointer
    // buffer over the tensor's own memory under zero-copy.
    Buffer transfer;
    const void* host_ptr = nullptr;  // tensor memory `transfer` wraps (zero-copy)
    Launch convert;                  // fp16 storage: transfer <-> buffer
    size_t float_bytes() const;
  };
  struct OpProfile {
    std::string shape;
    double flops = 0, bytes = 0;
  };

  OpContext MakeOpContext();
  bool InputShapesChanged(TfLiteContext* ctx);
  void Plan(TfLiteContext* ctx);
  void ReleaseLaunches();
  bool HostPointersChanged(TfLiteContext* ctx) const;
  bool OutputEmpty(size_t op) const;
  void Bind(TfLiteContext* ctx);
  cl_mem Mem(int t) const {
    const Value& v = values_.at(t);
    return v.slot >= 0 ? shared_[v.slot].get() : v.buffer.get();
  }
  cl_mem TransferMem(int t) const;
  void CaptureValues();
  void RecordProfile(const std::vector<Event>& events, const std::vector<int>& event_op,
                     const std::vector<int64_t>& event_bytes, double wall_ns, int kernels);

  std::shared_ptr<DelegateCore> core_;
  int id_ = 0;
  bool zero_copy_ = false;
  std::vector<std::unique_ptr<Op>> ops_;
  std::vector<std::vector<Shape>> out_shapes_;
  std::vector<OpProfile> op_profiles_;
  std::map<int, Value> values_;
  std::vector<int> uploads_, downloads_;  // tensor indices, in a fixed order
  Buffer arena_;                          // the activations, placed by the memory planner
  std::vector<Buffer> shared_;            // whole shared buffers where views are avoided
  std::vector<Buffer> scratch_;           // shared op scratch (Winograd transforms), one per slot
  MemoryReport report_;
  bool planned_ = false, bound_ = false;
  cl_event last_event_ = nullptr;  // out-parameter of the enqueue being issued
};

}  // namespace clgpu
