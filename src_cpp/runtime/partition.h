// One delegated partition on the device (partition.cc: build; partition_plan.cc: plan, with
// partition_fold.cc's folds; partition_bind.cc: bind; partition_invoke.cc: invoke;
// partition_overflow.cc and partition_storage.cc: fp16's range, per-op float32). Built at
// kernel init (ops, weights); planned when input shapes change (shapes, memory plan, output
// resizes); bound when buffers change (kernel arguments); run at invoke with one transfer per
// boundary tensor (per piece or range for one larger than a buffer), every kernel
// and copy enqueued without host sync, and one clFinish.
//
// Larger than the device's largest allocation (runtime/split.h): a tensor is kept
// as pieces, own buffers outside the memory plan, and never zero-copy; an op that
// touches one, or whose weights or scratch would exceed a buffer, runs in chunks
// that copy boxes between the pieces and staging buffers shared by the partition.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fusion/pass.h"
#include "ops/conv_geometry.h"
#include "ops/matmul_views.h"
#include "ops/op.h"
#include "runtime/cpu_fallback.h"
#include "runtime/launch_forms.h"
#include "runtime/memory_planner.h"
#include "runtime/partition_host.h"
#include "runtime/setup_progress.h"
#include "runtime/split.h"

namespace clgpu {

class Partition {
 public:
  // Valid only inside delegate Prepare (kernel init): reads nodes and constants. `host`
  // outlives the partition.
  Partition(TfLiteContext* ctx, const TfLiteDelegateParams* params,
            std::shared_ptr<PartitionHost> host);
  ~Partition();

  void Prepare(TfLiteContext* ctx);  // kernel prepare: re-plan if shapes changed
  void Invoke(TfLiteContext* ctx);
  bool warming() const { return warming_; }

 private:
  enum class Kind { kInput, kConstant, kInternal, kOutput };
  struct Value {
    Kind kind = Kind::kInternal;
    bool is_partition_output = false;
    // Its element type (graph/quant.h): kFloat is float32 in TFLite's memory and the float
    // storage on the device; int8 / uint8 are the same bytes on both sides.
    ValueType type = ValueType::kFloat;
    // Under fp16 storage, a float value's device type: half unless precision auto moved the op
    // writing it (or, for a partition input, one reading it) to float32 (partition_storage.cc).
    bool half = true;
    Shape shape;
    Buffer buffer;  // constants: own buffer; activations: a view into arena_ (or own)
    int slot = -1;  // index into shared_ when activations share whole buffers
    size_t arena_offset = SIZE_MAX;       // where `buffer` (a view) sits in arena_
    std::vector<float> constant;          // host copy of a float constant
    std::vector<uint8_t> constant_bytes;  // of any other constant, as TFLite holds it
    // The buffer TFLite's tensor is transferred through when it is not `buffer`
    // itself: a float32 staging copy of a float value under fp16 storage, or a
    // host-pointer buffer over the tensor's own memory under zero-copy.
    Buffer transfer;
    const void* host_ptr = nullptr;  // tensor memory `transfer` wraps (zero-copy)
    Launch convert;                  // fp16 storage: transfer <-> buffer
    // Larger than one buffer: the pieces and their buffers (runtime/split.h).
    std::vector<Piece> pieces;
    std::vector<Buffer> piece_buffers;
    // Transferred a range at a time (split, or an fp16 value whose float32 copy
    // would exceed a buffer): into its piece directly, or through transfer_staging_
    // and a conversion under fp16.
    struct Range {
      size_t piece = 0, begin = 0, end = 0;  // flat elements, inside pieces[piece]
      Launch convert;
    };
    bool ranged = false;
    std::vector<Range> ranges;
    // The output of a conv whose ADD consumer is folded into it this plan: never
    // written, no memory.
    bool elided = false;
    // This plan: the output of a RESHAPE (or its kin) kept in its input's storage, the copy
    // skipped (AliasFlatCopies), or a concatenation kept in the first columns of a wider one
    // that extends it (fusion/concat_chain.cc): the tensor whose storage it shares.
    int alias = -1;
    bool split() const { return !piece_buffers.empty(); }
    size_t host_bytes() const;  // in TFLite's memory
  };
  // One enqueue of an op: a kernel, or a copy of a chunk's box.
  struct Step {
    const Launch* launch = nullptr;  // else `copy`
    CopyCommand copy;
    const char* name = nullptr;  // a copy's profile name
    const Op* owner = nullptr;   // the op or chunk the step belongs to
  };
  struct OpRun {
    ChunkPlan plan;  // empty: the op runs whole
    std::vector<std::unique_ptr<Op>> chunks;
    std::vector<Step> steps;
    bool flat = false;  // its steps are the copies of Op::FlatRanges
  };
  // Under precision auto, where a reader's storage type differs from its input's: the input
  // converted into `buffer` as the reader's first step (a constant: uploaded there once).
  struct Conversion {
    size_t op = 0;   // the reader
    int value = -1;  // its input (once, however many of its operands it is)
    Buffer buffer;
    Launch launch;  // none for a constant
  };
  struct OpProfile {
    std::string shape;
    double flops = 0, bytes = 0;
  };

  // The constructor's steps (partition.cc).
  void RegisterValues(const GraphView& graph, const Op& op, const std::set<int>& inputs,
                      const std::set<int>& outputs);
  void FinishValues(const GraphView& graph, const std::vector<int>& folded_weights);
  bool InputShapesChanged(TfLiteContext* ctx);
  bool InputShapesDiffer(TfLiteContext* ctx) const;  // the same, changing nothing
  void Plan(TfLiteContext* ctx);                     // PlanShapes, PlanDevice, ResizeOutputs
  void PlanShapes();
  void FreshAttachments();  // a new plan's: nothing folded, nothing absorbed
  void PlanDevice();
  // PlanDevice's steps (partition_plan.cc).
  void UploadReadConstants(OpContext& octx);
  std::vector<size_t> PlanPiecesAndChunks(const OpContext& octx, size_t chunk_bytes);
  std::vector<TensorUsage> PlanLifetimes(std::vector<int>* planned);
  void AllocateActivations(size_t max_alloc, const std::vector<size_t>& staging_bytes);
  // Boundary transfers: a split value a piece at a time; a float value under fp16 storage
  // through a float32 staging buffer; zero-copy wraps the others.
  void PlanBoundaryTransfers(size_t max_alloc, size_t chunk_bytes);
  void ResizeOutputs(TfLiteContext* ctx);
  void PrepareWarm(TfLiteContext* ctx);
  bool InvokeWarm(TfLiteContext* ctx);  // true: the CPU ran it
  // One invoke's enqueues (partition_invoke.cc). With profiling on (`on`) each gets an event,
  // labelled -1 (an upload), -2 (a download) or its op's index and step.
  struct Recorder {
    bool on;
    cl_event& last;  // the out-parameter of the enqueue being issued
    std::vector<Event> events;
    std::vector<int> event_op, event_step;
    std::vector<int64_t> event_bytes;
    cl_event* Slot(int op, int64_t bytes, int step = -1);
    void Keep();  // the issued enqueue's event, kept
  };
  void EnqueueUploads(TfLiteContext* ctx, cl_command_queue q, Recorder& rec, InvokeCounts& counts);
  int EnqueueOps(cl_command_queue q, Recorder& rec);
  void EnqueueDownloads(TfLiteContext* ctx, cl_command_queue q, Recorder& rec,
                        InvokeCounts& counts);
  void RunConvert(cl_command_queue q, const Launch& l, int which, Recorder& rec);
  void FinishSetup();                              // waits for the setup thread, if any
  bool WarmShapesMoved(TfLiteContext* ctx) const;  // input shapes other than warm_shapes_
  void ReleaseLaunches();
  bool HostPointersChanged(TfLiteContext* ctx) const;
  // This plan's folds (fusion/pass.h): each pass of passes_ in order, unless fusion is off.
  void ApplyFolds(const OpContext& octx);
  class Folding;  // the plan as the passes see it (partition_fold.cc)
  void AliasFlatCopies();
  bool StorageReadBesides(int t, size_t op) const;
  // The tensor whose storage `t` uses (itself unless aliased).
  int Root(int t) const {
    while (values_.at(t).alias >= 0) t = values_.at(t).alias;
    return t;
  }
  // An ADD folded into its conv, or an op whose outputs are all empty (as the CPU
  // produces for a too-small input; one empty output of a SPLIT_V is not enough): no launches.
  bool RunsNothing(size_t op) const;
  void Bind(TfLiteContext* ctx);  // null ctx: no zero-copy wraps yet (the setup thread)
  // What the bound partition launches (kernels, extents, forms, copies, fp16 or not) on which
  // device, hashed: partitions with one key share their launch-form pairs
  // (runtime/launch_forms.h).
  uint64_t FormKey() const;
  cl_mem Mem(int t) const {
    const Value& v = values_.at(Root(t));
    return v.slot >= 0 ? shared_[v.slot].get() : v.buffer.get();
  }
  cl_mem TransferMem(int t) const;
  int64_t ZeroCopyBytes(size_t bytes) const;  // what a zero-copy map moves (profiles)
  // A ranged value's transfer, range by range (upload: from `host`; else into it).
  void TransferRanges(cl_command_queue q, const Value& v, char* host, bool upload, Recorder& rec);
  // Device bytes of one element of value t.
  size_t ElemBytes(int t) const;
  // A float value under fp16 storage: transferred through a float32 copy and a conversion.
  bool Converted(const Value& v) const { return v.type == ValueType::kFloat && half_ && v.half; }
  // Per-op precision under auto (partition_storage.cc): op i runs in float32.
  bool Fp32(size_t i) const { return i < fp32_.size() && fp32_[i]; }
  // The delegate's context, in float32 storage for an op that runs in float32.
  OpContext StorageCtx(const OpContext& octx, size_t i) const;
  // Op `into` absorbs op `op` for this plan (a fold): they run as one, in one precision.
  void Absorb(size_t op, size_t into);
  bool SamePrecision(size_t op, const std::vector<size_t>& others) const;
  std::vector<size_t> GroupOf(size_t op) const;  // op and the ops folded into it
  void AssignStorage();                          // each value's `half`, from the fp32 ops
  bool PlanConversions(const OpContext& octx);   // false: one cannot be made (pieces, chunks)
  void BindConversions(const OpContext& octx);
  const Conversion* ConversionOf(size_t op, size_t input) const;
  cl_mem InputMem(size_t op, size_t input) const;        // what op reads as that input
  Storage InputStorage(size_t op, size_t input) const;   // the same, as storage
  size_t InputElemBytes(size_t op, size_t input) const;  // its element bytes
  // Moves these ops (and their fold groups) to their float32 twins; every op: the partition
  // runs in float32 storage. Says so, and counts the nodes; the next invoke re-plans.
  void RunInFloat32(std::vector<size_t> ops);
  // The delegate's op context, with float32 storage once this partition fell back to it.
  OpContext MakeOpContext() const;
  // fp16 storage's range check (partition_overflow.cc): every kernel's saturating store notes
  // its op (or the input conversion its input) in overflow_flag_, read with the outputs.
  void BindOverflowFlags();
  void EnqueueOverflowRead(cl_command_queue q);
  // After the invoke's wait: true when it must run again (values left fp16's range under
  // precision auto, and the ops they met now run in float32).
  bool HandleOverflow();
  std::vector<int> OverflowNodes() const;   // the nodes the set words name
  std::vector<size_t> OverflowOps() const;  // the ops to move to float32 for them
  // The context op i prepares in: its activations' integer type when they all have one
  // (OpContext::ForValues), else the float storage's.
  OpContext OpCtx(const OpContext& octx, size_t i) const;
  Storage StorageOf(int t) const;
  void PlanTransferRanges(Value& v, size_t stage_elems);
  void BindChunks(OpContext& octx, size_t i);
  // Bind's steps (partition_bind.cc).
  void WrapBoundaryTensors(TfLiteContext* ctx);
  void MakeTransferConversions(OpContext& octx);
  void MakeChunks();
  size_t AllocateScratch(OpContext& octx);
  void PrepareOps(OpContext& octx);
  size_t ProfileOps();
  void CaptureValues();
  void RecordProfile(const std::vector<Event>& events, const std::vector<int>& event_op,
                     const std::vector<int>& event_step, const std::vector<int64_t>& event_bytes,
                     double wall_ns, double enqueue_ns, int commands);

  std::shared_ptr<PartitionHost> host_;
  int id_ = 0;
  bool half_ = false;  // fp16 storage (the delegate's), until an overflow under auto
  // Under precision auto: the same ops again, built for float32 storage; an op that leaves
  // fp16's range swaps with its twin (fp32_), the rest stay fp16.
  std::vector<std::unique_ptr<Op>> fp32_ops_;
  std::vector<bool> fp32_;               // per op: runs in float32 (the set only grows)
  std::vector<Conversion> conversions_;  // this plan's, where storage types meet
  std::vector<int> folded_into_;         // per op: the op that absorbed it this plan, or -1
  Buffer overflow_flag_;                 // a word per op, then per partition input
  std::vector<int32_t> overflow_host_;   // its copy, read with the outputs while watched
  bool overflow_watch_ = false;          // fp16: until one was seen (auto falls back, fp16 warns)
  bool warned_overflow_ = false;         // precision fp16 said it once
  bool zero_copy_ = false;
  // EnqueueOps flushes after command flush_first_ and every flush_every_-th (CLGPU_FLUSH).
  int flush_first_ = 2, flush_every_ = 16;
  std::vector<std::pair<cl_mem, void*>> mapped_;  // Invoke's mapped outputs (zero-copy)
  std::vector<std::unique_ptr<Op>> ops_;
  // A flat copy's output -> its input (RESHAPE and its kin): where run-time positions that
  // reach an op through such copies are read in TFLite's memory (partition_invoke.cc).
  std::map<int, int> copied_from_;
  std::vector<std::vector<Shape>> out_shapes_;
  std::vector<OpProfile> op_profiles_;
  std::map<int, Value> values_;
  std::vector<int> uploads_, downloads_;  // tensor indices, in a fixed order
  std::map<int, Shape> shape_reads_;      // tensors ops read the shape of only (Op::ShapeInputs)
  Buffer arena_;                          // the activations, placed by the memory planner
  std::vector<Buffer> shared_;            // whole shared buffers where views are avoided
  std::vector<Buffer> scratch_;           // shared op scratch (Winograd transforms), one per slot
  std::vector<Buffer> staging_;           // chunks' input boxes, then output boxes, per slot
  Buffer transfer_staging_;               // float32 ranges of ranged fp16 transfers
  std::vector<OpRun> runs_;               // per op; released before the buffers above
  // The fold passes, with what each found on this partition's graph (FusionPass::Find).
  std::vector<std::unique_ptr<FusionPass>> passes_;
  std::vector<bool> absorbed_;  // per op: folded into another op this plan (runs nothing)
  // Per op: what this plan folds into it (the op reads it through Op::Attach).
  std::vector<Attachments> attachments_;
  MemoryReport report_;
  bool planned_ = false, device_planned_ = false, bound_ = false;
  cl_event last_event_ = nullptr;  // out-parameter of the enqueue being issued
  LaunchFormTrial forms_;          // which launch form the invokes run (runtime/launch_forms.h)
  LaunchForm form_ = LaunchForm::kBoth;  // this invoke's
  // cpu_warmup: the replaced nodes on TFLite's CPU kernels while setup_ plans and binds.
  std::unique_ptr<CpuFallback> cpu_;
  std::thread setup_;
  std::atomic<bool> setup_done_{false}, cancel_{false};
  SetupProgress progress_;  // of the op prepares in Bind, read while the setup thread binds
  std::exception_ptr setup_error_;
  bool warming_ = false;                            // invokes run cpu_ until setup_ is done
  bool cpu_only_ = false;                           // the device setup failed: cpu_ from then on
  std::vector<std::pair<int, Shape>> warm_shapes_;  // the input shapes cpu_ is prepared for
};

}  // namespace clgpu
