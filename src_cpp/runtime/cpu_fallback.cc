#include "runtime/cpu_fallback.h"

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <thread>
#include <utility>

#include "common/env.h"
#include "common/error.h"
#include "runtime/memory_planner.h"
#include "tflite/builtin.h"

namespace clgpu {
namespace {

constexpr size_t kAlign = 64;  // what TFLite's own arena aligns to

// The warm-up's CPU kernels on half the host's cores (at most 16; $CLGPU_WARMUP_THREADS sets
// another count) when the interpreter asked for fewer: LiteRT's Python interpreter passes one
// thread unless told otherwise, and on one thread TFLite's kernels took 50x XNNPACK's 16-thread
// time on a large image model. The other half is left to the compiler and the application. 2.14's
// -1 (the runtime's own choice, every core) stays. Set and refreshed as the interpreter's
// SetNumThreads does, and put back after the run, so the nodes outside the partition run as they
// were told.
class MoreThreads {
 public:
  explicit MoreThreads(TfLiteContext* ctx) : ctx_(ctx), old_(ctx->recommended_num_threads) {
    if (old_ >= 1 && Wanted() > old_) Set(Wanted());
  }
  ~MoreThreads() {
    if (ctx_->recommended_num_threads != old_) Set(old_);
  }
  MoreThreads(const MoreThreads&) = delete;
  MoreThreads& operator=(const MoreThreads&) = delete;

 private:
  void Set(int n) {
    ctx_->recommended_num_threads = n;
    for (int type : {kTfLiteEigenContext, kTfLiteGemmLowpContext, kTfLiteCpuBackendContext}) {
      auto* c = static_cast<TfLiteExternalContext*>(ctx_->GetExternalContext(ctx_, type));
      if (c && c->Refresh) c->Refresh(ctx_);
    }
  }
  // $CLGPU_WARMUP_THREADS, else half the host's cores (at most 16).
  static int Wanted() {
    const int n = std::atoi(GetEnv("CLGPU_WARMUP_THREADS").value_or("").c_str());
    if (n > 0) return std::min(n, 256);
    return static_cast<int>(std::min(16u, std::thread::hardware_concurrency() / 2));
  }
  TfLiteContext* ctx_;
  int old_;
};
// LiteRT's status of a prepare whose output shape is known only once the kernel runs (the
// interpreter then prepares the nodes after it at invoke); tflite_runtime 2.14 has none.
constexpr int kOutputShapeNotKnown = 9;

// A kernel's prepare that fails reports through ctx->ReportError; here that only means "no
// warm-up", so the first message is kept for the log instead of reaching the user.
thread_local std::string* g_first_report = nullptr;

void KeepFirstReport(TfLiteContext*, const char* format, ...) {
  if (!g_first_report || !g_first_report->empty()) return;
  char text[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(text, sizeof text, format, args);
  va_end(args);
  *g_first_report = text;
}

class QuietReports {
 public:
  QuietReports(TfLiteContext* ctx, std::string* first) : ctx_(ctx), saved_(ctx->ReportError) {
    g_first_report = first;
    ctx->ReportError = KeepFirstReport;
  }
  ~QuietReports() {
    ctx_->ReportError = saved_;
    g_first_report = nullptr;
  }
  QuietReports(const QuietReports&) = delete;
  QuietReports& operator=(const QuietReports&) = delete;

 private:
  TfLiteContext* ctx_;
  void (*saved_)(TfLiteContext*, const char*, ...);
};

bool ArenaType(TfLiteAllocationType t) {
  return t == kTfLiteArenaRw || t == kTfLiteArenaRwPersistent;
}

}  // namespace

CpuFallback::CpuFallback(NodeLookup lookup, TensorRoom* room, std::vector<int> nodes,
                         std::set<int> boundary, std::set<int> shape_nodes)
    : lookup_(lookup),
      room_(room),
      nodes_(std::move(nodes)),
      boundary_(std::move(boundary)),
      shape_nodes_(std::move(shape_nodes)) {}

// The boundary tensors are TFLite's: a kernel's prepare resizes its outputs (to the shapes the
// partition already gave them), which drops an arena tensor's pointer; kept as they were.
class CpuFallback::KeepBoundary {
 public:
  KeepBoundary(TfLiteContext* ctx, const std::set<int>& boundary) : ctx_(ctx) {
    for (int t : boundary)
      saved_.push_back({t, ctx->tensors[t].data.raw, ctx->tensors[t].allocation_type});
  }
  ~KeepBoundary() {
    for (const Saved& s : saved_) {  // by index: ctx->tensors moves when a kernel adds tensors
      ctx_->tensors[s.tensor].data.raw = static_cast<char*>(s.data);
      ctx_->tensors[s.tensor].allocation_type = s.type;
    }
  }
  // A tensor whose allocation a kernel changed (made it dynamic), or -1.
  int Changed() const {
    for (const Saved& s : saved_)
      if (ctx_->tensors[s.tensor].allocation_type != s.type) return s.tensor;
    return -1;
  }

 private:
  struct Saved {
    int tensor;
    void* data;
    TfLiteAllocationType type;
  };
  TfLiteContext* ctx_;
  std::vector<Saved> saved_;
};

void CpuFallback::NodeAt(TfLiteContext* ctx, size_t k, TfLiteNode** node,
                         TfLiteRegistration** reg) const {
  if (lookup_(ctx, nodes_[k], node, reg) != kTfLiteOk || !*node || !*reg)
    throw Error("cannot read node " + std::to_string(nodes_[k]));
}

// "" once the node's CPU kernel is prepared, else why it cannot run here. A kernel that sizes an
// output only at invoke (a dynamic tensor) is one: the interpreter would prepare the nodes after
// it again then, which is not done here (a TRANSPOSE_CONV run so crashed LiteRT 2.3).
std::string CpuFallback::PrepareNode(TfLiteContext* ctx, size_t k) {
  room_->Ensure(ctx);
  TfLiteNode* node = nullptr;
  TfLiteRegistration* reg = nullptr;
  NodeAt(ctx, k, &node, &reg);
  const std::string name = "node " + std::to_string(nodes_[k]);
  if (reg->registration_external) return name + " runs through an external registration";
  if (!reg->invoke || (reg->builtin_code == tfl::kCustom && !reg->prepare))
    return name + " has no CPU kernel (a custom op the runtime did not resolve)";
  // A shape node's outputs become persistent (heap memory TFLite's resize allocates and its
  // teardown frees), unless the partition hands one out.
  bool at_prepare = shape_nodes_.count(nodes_[k]) != 0;
  for (int i = 0; at_prepare && node->outputs && i < node->outputs->size; ++i)
    at_prepare = node->outputs->data[i] >= 0 && !boundary_.count(node->outputs->data[i]);
  for (int i = 0; at_prepare && i < node->outputs->size; ++i) {
    TfLiteTensor& x = ctx->tensors[node->outputs->data[i]];
    if (x.allocation_type == kTfLitePersistentRo) continue;
    x.data.raw = nullptr;  // not TFLite's arena memory any more
    x.allocation_type = kTfLitePersistentRo;
  }
  std::string report;
  const int status = [&] {
    QuietReports quiet(ctx, &report);
    return reg->prepare ? static_cast<int>(reg->prepare(ctx, node)) : 0;
  }();
  const std::string sized_late = "the CPU kernel of " + name + " sizes its output at invoke";
  if (status == kOutputShapeNotKnown) return sized_late;
  if (status != kTfLiteOk)
    return "the CPU kernel of " + name + " failed to prepare" +
           (report.empty() ? "" : ": " + report);
  for (int i = 0; node->outputs && i < node->outputs->size; ++i)
    if (node->outputs->data[i] >= 0 &&
        ctx->tensors[node->outputs->data[i]].allocation_type == kTfLiteDynamic)
      return sized_late;
  ran_at_prepare_[k] = at_prepare;
  if (!at_prepare) return "";
  for (int i = 0; i < node->outputs->size; ++i) {
    const TfLiteTensor& x = ctx->tensors[node->outputs->data[i]];
    if (x.allocation_type != kTfLitePersistentRo || (!x.data.raw && x.bytes))
      return "the CPU kernel of " + name + " leaves its output without memory";
  }
  const int run = [&] {
    QuietReports quiet(ctx, &report);
    return static_cast<int>(reg->invoke(ctx, node));
  }();
  if (run != kTfLiteOk)
    return "the CPU kernel of " + name + " failed at prepare" +
           (report.empty() ? "" : ": " + report);
  // Read-only model data from here on: some kernels size their output at prepare only from a
  // constant (LiteRT's TRANSPOSE_CONV), not from a persistent tensor. The values move to
  // memory of ours; TFLite's own buffer comes back at Release.
  for (int i = 0; i < node->outputs->size; ++i) {
    const int t = node->outputs->data[i];
    TfLiteTensor& x = ctx->tensors[t];
    if (!x.data.raw) continue;
    Pinned p{t, x.data.raw, std::unique_ptr<uint8_t[]>(new uint8_t[x.bytes])};
    std::memcpy(p.copy.get(), x.data.raw, x.bytes);
    x.data.raw = reinterpret_cast<char*>(p.copy.get());
    x.allocation_type = kTfLiteMmapRo;
    pinned_.push_back(std::move(p));
  }
  return "";
}

std::string CpuFallback::Prepare(TfLiteContext* ctx) {
  Release(ctx);
  ctx_ = ctx;
  std::string why;
  try {
    MoreThreads threads(ctx);  // a kernel chooses its multi-threaded code at prepare (CONV_2D)
    KeepBoundary keep(ctx, boundary_);
    ran_at_prepare_.assign(nodes_.size(), false);
    for (size_t k = 0; k < nodes_.size() && why.empty(); ++k) why = PrepareNode(ctx, k);
    if (const int t = keep.Changed(); why.empty() && t >= 0)
      why = "the CPU kernels change how tensor " + std::to_string(t) + " is allocated";
  } catch (...) {
    Release(ctx);  // the shape nodes' outputs back to TFLite
    throw;
  }
  if (!why.empty()) {
    Release(ctx);
    return why;
  }

  // Lifetimes in node positions: produced at its first use, alive to its last; a persistent
  // tensor (a kernel's state kept across invokes) for the whole partition.
  const int n = static_cast<int>(nodes_.size());
  std::map<int, TensorUsage> use;
  std::map<int, TfLiteAllocationType> types;
  for (int k = 0; k < n; ++k) {
    TfLiteNode* node = nullptr;
    TfLiteRegistration* reg = nullptr;
    NodeAt(ctx, k, &node, &reg);
    auto visit = [&](const TfLiteIntArray* list) {
      for (int i = 0; list && i < list->size; ++i) {
        const int t = list->data[i];
        if (t < 0 || boundary_.count(t)) continue;
        const TfLiteTensor& x = ctx->tensors[t];
        if (!ArenaType(x.allocation_type)) continue;
        auto [it, fresh] = use.try_emplace(t);
        TensorUsage& u = it->second;
        if (fresh)
          u.first = k, u.bytes = std::max<size_t>(x.bytes, 1), types[t] = x.allocation_type;
        u.last = std::max(u.last, k);
        if (x.allocation_type == kTfLiteArenaRwPersistent) u.first = 0, u.last = n - 1;
      }
    };
    visit(node->inputs);
    visit(node->outputs);
    visit(node->temporaries);
    visit(node->intermediates);
    for (int i = 0; node->temporaries && i < node->temporaries->size; ++i) {
      const int t = node->temporaries->data[i];
      if (t >= 0 && ctx->tensors[t].data.raw && !ArenaType(ctx->tensors[t].allocation_type))
        heap_temporaries_.push_back(t);
    }
  }
  std::vector<TensorUsage> usage;
  std::vector<int> tensors;
  for (const auto& [t, u] : use) tensors.push_back(t), usage.push_back(u);
  const OffsetPlan plan = PlanOffsetsGreedyBySize(usage, kAlign);
  storage_.reset(new uint8_t[plan.arena_bytes + kAlign]);
  const auto base = reinterpret_cast<uintptr_t>(storage_.get());
  arena_ = storage_.get() + ((kAlign - base % kAlign) % kAlign);
  for (size_t i = 0; i < tensors.size(); ++i)
    backed_.push_back(
        Backed{tensors[i], types[tensors[i]], plan.offsets[i], ctx->tensors[tensors[i]].bytes});
  prepared_ = true;
  Bind(ctx);
  return "";
}

// Custom allocation: neither TFLite's arena planner nor a resize touches the pointer.
void CpuFallback::Bind(TfLiteContext* ctx) const {
  for (const Backed& b : backed_) {
    TfLiteTensor& x = ctx->tensors[b.tensor];
    x.data.raw = reinterpret_cast<char*>(arena_ + b.offset);
    x.bytes = b.bytes;
    x.allocation_type = kTfLiteCustom;
  }
}

size_t CpuFallback::Invoke(TfLiteContext* ctx, const std::function<bool(size_t)>& stop,
                           size_t from) {
  if (!prepared_) throw Error("the CPU fallback runs before its prepare");
  if (from == 0) {
    // After the prepares, TFLite's AllocateTensors frees the temporaries of the nodes a
    // delegate replaced (their heap memory; a custom one loses its pointer and size). A
    // kernel's state kept there since its prepare (TRANSPOSE_CONV's transposed weights) is
    // gone, so the kernels prepare again, once per AllocateTensors.
    for (int t : heap_temporaries_)
      if (!ctx->tensors[t].data.raw) {
        if (std::string why = Prepare(ctx); !why.empty())
          throw Error("the CPU kernels no longer prepare: " + why);
        break;
      }
    Bind(ctx);
  }
  node_ms_.resize(nodes_.size());
  MoreThreads threads(ctx);
  for (size_t k = from; k < nodes_.size(); ++k) {
    if (stop && stop(k)) return k;
    if (ran_at_prepare_[k]) continue;  // its outputs hold their values for these shapes
    TfLiteNode* node = nullptr;
    TfLiteRegistration* reg = nullptr;
    NodeAt(ctx, k, &node, &reg);
    const auto t0 = std::chrono::steady_clock::now();
    if (reg->invoke(ctx, node) != kTfLiteOk)
      throw Error("the CPU kernel of node " + std::to_string(nodes_[k]) + " failed");
    node_ms_[k] =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  }
  if (from == 0) last_node_ms_ = node_ms_;
  return nodes_.size();
}

double CpuFallback::RemainingMs(size_t k) const {
  if (last_node_ms_.size() != nodes_.size()) return -1;
  double ms = 0;
  for (size_t j = k; j < last_node_ms_.size(); ++j) ms += last_node_ms_[j];
  return ms;
}

void CpuFallback::Release(TfLiteContext* ctx) {
  if (ctx) {
    for (const Backed& b : backed_) {
      TfLiteTensor& x = ctx->tensors[b.tensor];
      x.data.raw = nullptr;
      x.allocation_type = b.type;
    }
    for (const Pinned& p : pinned_) {  // TFLite frees these at its teardown
      TfLiteTensor& x = ctx->tensors[p.tensor];
      x.data.raw = static_cast<char*>(p.own);
      x.allocation_type = kTfLitePersistentRo;
    }
  }
  backed_.clear();
  pinned_.clear();
  heap_temporaries_.clear();
  storage_.reset();
  arena_ = nullptr;
  prepared_ = false;
}

}  // namespace clgpu
