// Room in a context's tensor list for the CPU kernels the warm-up prepares
// (runtime/cpu_fallback.h). TFLite makes room for 16 new tensors before each node's prepare,
// because a kernel holds tensor pointers across its own AddTensors (its temporaries) and the list
// must not move under them. A partition prepares several kernels inside one prepare of its own, so
// it keeps that promise itself; TensorRoom keeps what is known of the list's capacity, shared by
// all the partitions of one delegate. Capacity is not readable: it is learnt from TFLite's promise
// at a partition's prepare, or from a probe that adds empty tensors until the list moves. Each
// probe fills the list to its capacity, which the next growth doubles: probing anew in each
// partition's prepare doubled the list per partition (about 24 GB, then std::bad_alloc, at 21).
#pragma once

#include <cstddef>
#include <mutex>

#include "tflite/abi.h"

namespace clgpu {

class TensorRoom {
 public:
  static constexpr size_t kRoom = 16;  // TFLite's kTensorsCapacityHeadroom

  // At a node's prepare, which TFLite called for this context: the list has room for kRoom.
  void Granted(const TfLiteContext* ctx);
  // Room for kRoom new tensors in the list without moving it, as TFLite gives before each
  // prepare: from what is known, else made (a probe). Throws Error when AddTensors fails.
  void Ensure(TfLiteContext* ctx);
  // Drops what is known: a new delegate Prepare may see a new context at a freed one's address.
  void Forget();

 private:
  // The length up to which ctx's list is known not to move (mutex_ held); 0 when nothing is.
  size_t KnownUntil(const TfLiteContext* ctx) const;
  void Learn(const TfLiteContext* ctx, size_t until);  // mutex_ held

  std::mutex mutex_;
  // A vector's capacity never shrinks, and grows only by moving to a new list: what was learnt
  // holds while the context's list is the one it was learnt on.
  const TfLiteContext* ctx_ = nullptr;
  const TfLiteTensor* list_ = nullptr;
  size_t until_ = 0;
};

}  // namespace clgpu
