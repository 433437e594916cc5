// The TFLite registration of our partition kernels: init / free / prepare /
// invoke trampolines around runtime/partition. No exception crosses into the
// runtime: errors are reported through context->ReportError.
#include <cstring>
#include <memory>
#include <string>

#include "common/error.h"
#include "delegate/delegate.h"
#include "runtime/partition.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

// A kernel whose init failed keeps the reason and reports it at prepare (init
// itself has no way to fail in both runtimes).
struct KernelHandle {
  std::unique_ptr<Partition> partition;
  std::shared_ptr<DelegateCore> core;  // for the queue lock
  std::string init_error;
};

void* Init(TfLiteContext* ctx, const char* buffer, size_t) {
  auto* h = new KernelHandle;
  try {
    const auto* params = reinterpret_cast<const TfLiteDelegateParams*>(buffer);
    h->core = DelegateCore::From(params->delegate)->shared();
    h->partition = std::make_unique<Partition>(ctx, params, h->core);
  } catch (const std::exception& e) {
    h->init_error = What(e);
  } catch (...) {
    h->init_error = "an exception of unknown type";
  }
  return h;
}

void Free(TfLiteContext*, void* buffer) { delete static_cast<KernelHandle*>(buffer); }

template <typename F>
TfLiteStatus Guard(TfLiteContext* ctx, TfLiteNode* node, const char* stage, F&& f) {
  auto* h = static_cast<KernelHandle*>(node->user_data);
  if (!h || !h->partition) {
    ctx->ReportError(ctx, "clgpu_delegate: kernel init failed: %s",
                     h ? h->init_error.c_str() : "no kernel");
    return kTfLiteError;
  }
  try {
    // One queue per delegate: partitions of several interpreters sharing the
    // delegate, invoked from several threads, take turns.
    std::lock_guard<std::mutex> lock(h->core->queue_mutex());
    f(*h->partition);
    return kTfLiteOk;
  } catch (const std::exception& e) {
    ctx->ReportError(ctx, "clgpu_delegate: %s failed: %s", stage, What(e).c_str());
    return kTfLiteError;
  } catch (...) {
    ctx->ReportError(ctx, "clgpu_delegate: %s failed: an exception of unknown type", stage);
    return kTfLiteError;
  }
}

TfLiteStatus PrepareKernel(TfLiteContext* ctx, TfLiteNode* node) {
  return Guard(ctx, node, "prepare", [&](Partition& p) { p.Prepare(ctx); });
}

TfLiteStatus InvokeKernel(TfLiteContext* ctx, TfLiteNode* node) {
  return Guard(ctx, node, "invoke", [&](Partition& p) { p.Invoke(ctx); });
}

}  // namespace

TfLiteRegistration PartitionKernelRegistration() {
  TfLiteRegistration r;
  std::memset(&r, 0, sizeof r);
  r.init = Init;
  r.free = Free;
  r.prepare = PrepareKernel;
  r.invoke = InvokeKernel;
  r.builtin_code = tfl::kDelegate;
  r.custom_name = "CLGPU_DELEGATE";
  r.version = 1;
  return r;
}

}  // namespace clgpu
