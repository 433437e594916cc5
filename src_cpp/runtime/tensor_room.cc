#include "runtime/tensor_room.h"

#include <algorithm>

#include "common/error.h"

namespace clgpu {

void TensorRoom::Granted(const TfLiteContext* ctx) {
  std::lock_guard<std::mutex> lock(mutex_);
  Learn(ctx, std::max(KnownUntil(ctx), static_cast<size_t>(ctx->tensors_size) + kRoom));
}

void TensorRoom::Ensure(TfLiteContext* ctx) {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t until = KnownUntil(ctx);
  // The probe: empty tensors (kTfLiteMemNone, which nothing allocates) until the list moves,
  // which leaves its capacity at least 3/2 of the length it had (every std::vector growth
  // policy).
  while (static_cast<size_t>(ctx->tensors_size) + kRoom > until) {
    const TfLiteTensor* before = ctx->tensors;
    const size_t size = ctx->tensors_size;
    int first = 0;
    if (ctx->AddTensors(ctx, 1, &first) != kTfLiteOk) throw Error("AddTensors failed");
    if (ctx->tensors != before) until = size + size / 2;
  }
  Learn(ctx, until);
}

void TensorRoom::Forget() {
  std::lock_guard<std::mutex> lock(mutex_);
  ctx_ = nullptr;
  list_ = nullptr;
  until_ = 0;
}

size_t TensorRoom::KnownUntil(const TfLiteContext* ctx) const {
  return ctx == ctx_ && ctx->tensors == list_ ? until_ : 0;
}

void TensorRoom::Learn(const TfLiteContext* ctx, size_t until) {
  ctx_ = ctx;
  list_ = ctx->tensors;
  until_ = until;
}

}  // namespace clgpu
