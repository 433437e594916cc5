// The cpu_warmup side of a partition (runtime/partition.h): prepare starts the device setup on a
// thread and TFLite's CPU kernels for the replaced nodes; invokes run those until the setup is
// done, then the device (an invoke in flight when it ends finishes there).
#include <chrono>
#include <cstdlib>
#include <exception>
#include <string>
#include <system_error>
#include <thread>

#include "common/env.h"
#include "common/error.h"
#include "common/log.h"
#include "runtime/partition.h"

namespace clgpu {
namespace {
constexpr double kWaitHorizon = 10;  // invokes (see InvokeWarm)

// Test hook: $CLGPU_SETUP_DELAY_MS holds the setup thread that long before it starts, so a test
// sees invokes on the CPU whatever the program cache holds.
void HoldForTests(const std::atomic<bool>& cancel) {
  const std::optional<std::string> value = GetEnv("CLGPU_SETUP_DELAY_MS");
  if (!value || value->empty()) return;
  const char* env = value->c_str();
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::atol(env));
  while (!cancel && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

std::string Describe(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return What(x);
  } catch (...) {
    return "an exception of unknown type";
  }
}
}  // namespace

void Partition::FinishSetup() {
  if (setup_.joinable()) setup_.join();
}

bool Partition::WarmShapesMoved(TfLiteContext* ctx) const {
  for (const auto& [t, shape] : warm_shapes_)
    if (TensorShape(ctx->tensors[t]) != shape) return true;
  return false;
}

void Partition::PrepareWarm(TfLiteContext* ctx) {
  if (warming_ && !cpu_only_ && !setup_done_.load(std::memory_order_acquire) &&
      !WarmShapesMoved(ctx)) {
    // Prepared again for the same shapes while the setup runs (a delegate applied after this
    // one re-plans the graph): the CPU kernels prepare again, the setup goes on.
    if (cpu_->Prepare(ctx).empty()) return;
  }
  FinishSetup();       // a prepare for other shapes (a resize) waits for the setup in flight
  if (setup_error_) {  // try again, as a prepare without the warm-up would
    setup_error_ = nullptr;
    cpu_only_ = false;
    device_planned_ = bound_ = false;
  }
  const bool changed = InputShapesChanged(ctx);
  if (!changed && device_planned_ && bound_) {  // set up for these shapes: the device runs it
    if (warming_) cpu_->Release(ctx), warming_ = false;
    if (HostPointersChanged(ctx)) Bind(ctx);
    return;
  }
  if (changed) {
    PlanShapes();
    ResizeOutputs(ctx);
  }
  std::string why = cpu_->Prepare(ctx);  // declined or thrown: nothing backed
  if (why.empty()) {
    warm_shapes_.clear();
    for (int t : uploads_) warm_shapes_.emplace_back(t, values_.at(t).shape);
    for (const auto& [t, shape] : shape_reads_) warm_shapes_.emplace_back(t, shape);
    setup_done_ = false;
    progress_.Reset();
    warming_ = true;
    host_->WarmupStarted();
    try {
      // Only this thread touches the partition's device state until setup_done_.
      setup_ = std::thread([this] {
        try {
          HoldForTests(cancel_);
          if (!device_planned_) PlanDevice();
          Bind(nullptr);
        } catch (...) {
          setup_error_ = std::current_exception();
        }
        setup_done_.store(true, std::memory_order_release);
        host_->WarmupEnded();
      });
      Log(LogLevel::kDebug, "partition " + std::to_string(id_) +
                                ": runs on TFLite's CPU kernels while its programs build");
      return;
    } catch (const std::system_error& e) {
      host_->WarmupEnded();
      why = std::string("no thread to build on: ") + e.what();
    }
  }
  Log(LogLevel::kInfo,
      "partition " + std::to_string(id_) + " builds before its first invoke (" + why + ")");
  cpu_->Release(ctx);
  warming_ = false;
  if (!device_planned_) PlanDevice();
  Bind(ctx);
}

bool Partition::InvokeWarm(TfLiteContext* ctx) {
  // A dynamic input resized without a prepare: the CPU kernels were prepared for other shapes,
  // so the device takes over (and plans again) once its setup is done.
  const bool moved = WarmShapesMoved(ctx);
  bool done = cpu_only_ || setup_done_.load(std::memory_order_acquire);
  size_t resume = 0;  // the CPU kernels' position when the setup ended during their run
  if (!moved && !done) {
    // The CPU's run ends between two nodes when the setup has ended, or when the rest of the
    // run took more than twice the time the setup's pace says it still needs (the last whole
    // run's node times; a guess errs towards the CPU, which costs at most one node): the device
    // then runs the whole partition from its inputs, which the CPU kernels never write.
    // After a first result, an invoke also waits when the CPU could not run the next
    // kWaitHorizon invokes before the setup ends: the CPU kernels' threads slow the compiler,
    // and once it is done the device serves the invokes still to come in a fraction of the time.
    resume = cpu_->Invoke(ctx, [this](size_t k) {
      if (setup_done_.load(std::memory_order_acquire)) return true;
      const double rest = cpu_->RemainingMs(k);
      if (rest < 0) return false;
      const double setup = progress_.RemainingMs();
      return k == 0 ? setup < kWaitHorizon * rest : 2 * setup < rest;
    });
    if (resume == cpu_->size()) {
      host_->CountCpuInvoke();
      return true;
    }
    done = true;
  }
  if (done || moved) FinishSetup();
  if (done && !moved && setup_error_ && !cpu_only_) {
    Log(LogLevel::kWarning,
        "partition " + std::to_string(id_) +
            " stays on TFLite's CPU kernels: its device setup failed: " + Describe(setup_error_));
    cpu_only_ = true;
  }
  if (!moved && cpu_only_) {
    cpu_->Invoke(ctx, nullptr, resume);
    host_->CountCpuInvoke();
    return true;
  }
  cpu_->Release(ctx);
  warming_ = cpu_only_ = false;
  setup_error_ = nullptr;
  return false;
}

}  // namespace clgpu
