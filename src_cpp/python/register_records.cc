// The delegate's reports as read-only Python records, bound from their C++ structs: the
// decisions, ABI observation, counters, device memory and profile the Python layer re-exports
// (clgpu_delegate/results.py). A field's meaning is written here, once; _core.pyi is generated
// from these bindings (tests/core_stub.py).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "delegate/delegate.h"
#include "python/record.h"
#include "python/register.h"
#include "runtime/profiler.h"

namespace py = pybind11;

namespace clgpu::python {
namespace {

// The launch-form pairs' geometric mean of fewer / shorter time; 0 without pairs.
double PairRatio(const InvokeCounts& t) {
  return t.form_pairs ? std::exp(t.form_pair_log_ratio / double(t.form_pairs)) : 0.0;
}

void BindDecisions(py::module_& m) {
  Record<NodeDecision>(m, "NodeDecision",
                       "What the delegate did with one TFLite node at the last Prepare of its "
                       "subgraph.")
      .field("subgraph", &NodeDecision::subgraph,
             "0: the primary subgraph; others in the order TFLite prepared them.")
      .field("node", &NodeDecision::node)
      .field("op", &NodeDecision::op, "The TFLite builtin operator code.")
      .field("op_name", &NodeDecision::op_name)
      .field("delegated", &NodeDecision::claimed)
      .field("reason", &NodeDecision::reason, "Why it stays on the CPU; empty when delegated.")
      .field("note", &NodeDecision::note,
             "How a delegated node runs when notable (in chunks, ...); else empty.")
      .done();
  Record<AbiObservation>(m, "AbiObservation",
                         "What the delegate saw of the host runtime's ABI at the last Prepare.")
      .field("tensors_size", &AbiObservation::tensors_size)
      .field("node_to_registration", &AbiObservation::node_to_registration,
             "Bytes from a node to its registration.")
      .field("node_stride", &AbiObservation::node_stride, "Bytes between consecutive nodes.")
      .field("nodes_seen", &AbiObservation::nodes_seen)
      .field("params_read", &AbiObservation::params_read,
             "What was read of each node's params: 'node 3 CONV_2D padding=1 stride=1,1 ...'.")
      .done();
}

// A cost-model figure, or None where the model keeps its constant (0: not measured).
std::optional<double> Measured(double v) { return v > 0 ? std::optional<double>(v) : std::nullopt; }

void BindStats(py::module_& m) {
  using S = DelegateStats;
  Record<S>(m, "DelegateStats", "Counters of one delegate since it was created.")
      .field("prepares", &S::prepares)
      .field("kernels_created", &S::kernels_created)
      .field("invokes", &S::invokes)
      .field("driver_setup_us", &S::driver_setup_us,
             "OpenCL device listing + context creation (0 when reused).")
      .field("programs_built", &S::programs_built)
      .field("program_cache_hits", &S::program_cache_hits)
      .field("program_binary_loads", &S::program_binary_loads,
             "Of the device environment (shared by the delegates of a process): programs loaded "
             "from serialization_dir's binaries.")
      .field("program_build_us", &S::program_build_us,
             "The wall time of all builds and loads summed over the threads that ran them (so "
             "it may exceed the elapsed time).")
      .field("program_cubins_stored", &S::program_cubins_stored,
             "Of the binaries stored in serialization_dir, those kept as NVIDIA machine code "
             "(cubin, which loads at once) rather than PTX (compiled again at each load).")
      .field("plans", &S::plans,
             "Partition memory plans: at init, then when input shapes change (set-up work a "
             "steady-state invoke repeats none of).")
      .field("binds", &S::binds,
             "Kernel arguments bound: after a plan, or when TFLite moved a tensor.")
      .field("warmups", &S::warmups,
             "cpu_warmup: partitions whose programs built in the background.")
      .field("warming", &S::warming, "cpu_warmup: partitions still building.")
      .field("cpu_invokes", &S::cpu_invokes,
             "cpu_warmup: invokes TFLite's CPU kernels ran meanwhile (not in `invokes`).")
      .field("fp32_fallback_ops", &S::fp32_fallback_ops,
             "fp16 storage, values past its range (65504): the nodes (execution-plan indices) "
             "that run in float32 since their values left it, the others staying fp16 "
             "(precision='auto', that invoke included). Sorted.")
      .field("fp16_saturated_ops", &S::fp16_saturated_ops,
             "precision='fp16': the nodes whose values were saturated (said once in a "
             "warning). Sorted.")
      .field("buffers_created", &S::buffers_created,
             "OpenCL buffers of the delegate's device environment.")
      .computed(
          "host_syncs", [](const S& s) { return s.transfers.host_syncs; },
          "Host waits for the device, over all invokes.")
      .computed("uploads", [](const S& s) { return s.transfers.uploads; })
      .computed("downloads", [](const S& s) { return s.transfers.downloads; })
      .computed("upload_bytes", [](const S& s) { return s.transfers.upload_bytes; })
      .computed("download_bytes", [](const S& s) { return s.transfers.download_bytes; })
      .computed(
          "host_enqueue_us", [](const S& s) { return s.transfers.enqueue_ns / 1000; },
          "Host time of all invokes until the last command was enqueued. An invoke whose time "
          "is mostly enqueueing is bound by the host, not the device.")
      .computed(
          "host_wait_us", [](const S& s) { return s.transfers.wait_ns / 1000; },
          "Host time of all invokes from then on, waiting for the device to finish.")
      .computed(
          "fewer_launch_invokes", [](const S& s) { return s.transfers.fewer_launch_invokes; },
          "Partition invokes that ran the form with fewer launches and more device work (split-K "
          "convolutions summing their splits themselves), which a partition measures against "
          "the other in pairs of invokes and keeps where faster (CLGPU_LAUNCH_FORM).")
      .computed(
          "launch_form_pairs", [](const S& s) { return s.transfers.form_pairs; },
          "Pairs of invokes, one in each launch form, that the partitions timed to choose one.")
      .computed(
          "launch_form_pair_ratio", [](const S& s) { return PairRatio(s.transfers); },
          "Those pairs' geometric mean of fewer-launch time / other form's time (0: no pairs): "
          "under 1 where the fewer launches ran faster in the pairs.")
      .computed(
          "calibration_source", [](const S& s) { return s.calibration.source; },
          "The cost model's device figures (CLGPU_CALIBRATION): 'measured', 'cache' (this "
          "process), 'file' (serialization_dir) or 'constants'.")
      .computed(
          "calibration_kernel_us",
          [](const S& s) { return s.calibration.min_kernel_us + s.calibration.launch_gap_us; })
      .computed(
          "calibration_refined", [](const S& s) { return s.calibration.refined; },
          "Whether a close decision had the kernel figure measured again, over a window that "
          "meets the driver's lower launch level.")
      .computed("calibration_copy_us", [](const S& s) { return s.calibration.copy_us; })
      .computed("calibration_sync_us", [](const S& s) { return s.calibration.sync_us; })
      .computed(
          "calibration_gbps", [](const S& s) { return Measured(s.calibration.gbps); },
          "Host <-> device copies; None when not measured.")
      .computed(
          "calibration_mapped_gbps", [](const S& s) { return Measured(s.calibration.mapped_gbps); },
          "Host <-> device transfers through a mapped host-pointer buffer, as partitions make "
          "them with zero_copy (the figure the estimate then uses); None when not measured.")
      .computed(
          "calibration_gflops", [](const S& s) { return Measured(s.calibration.gflops); },
          "The arithmetic peak; None when not measured.")
      .field("disk_cache", &S::disk_cache,
             "Whether the delegate keeps program binaries on disk (serialization_dir); the "
             "disk_cache_* counters are 0 without.")
      .field("disk_cache_hits", &S::disk_cache_hits)
      .field("disk_cache_misses", &S::disk_cache_misses)
      .field("disk_cache_rejected", &S::disk_cache_rejected)
      .field("disk_cache_driver_rejected", &S::disk_cache_driver_rejected)
      .field("disk_cache_stored", &S::disk_cache_stored)
      .done();
}

void BindMemory(py::module_& m) {
  using R = MemoryReport;
  Record<R> part(m, "PartitionMemory",
                 "Device memory of one delegated partition, in bytes (see MemoryReport).");
  part.field("partition", &R::partition, "The partition's id; -1 in a MemoryReport's sums.")
      .field("naive_bytes", &R::naive_bytes, "Every activation its own buffer.")
      .field("lower_bound_bytes", &R::lower_bound_bytes,
             "The peak of activation bytes alive at once.")
      .field("allocated_bytes", &R::allocated_bytes,
             "What the lifetime-based planner allocated for activations.")
      .field("weight_bytes", &R::weight_bytes, "Weights and other constants.")
      .field("staging_bytes", &R::staging_bytes, "float32 transfer copies (fp16 storage).")
      .field("scratch_bytes", &R::scratch_bytes, "Op scratch (Winograd's transformed tiles).")
      .field("host_wrapped_bytes", &R::host_wrapped_bytes,
             "Zero-copy: partition inputs and outputs used in place in TFLite's own memory, "
             "outside the figures above (a discrete GPU's driver may mirror them).")
      .field("buffers", &R::buffers)
      .field("arena", &R::arena,
             "'sub-buffers' / 'svm' (views into one arena), 'shared', 'own' (a buffer per "
             "tensor); '' in a MemoryReport's sums.")
      .field("split_tensors", &R::split_tensors,
             "Activations larger than the device's largest allocation, kept in pieces.")
      .field("split_pieces", &R::split_pieces)
      .field("split_bytes", &R::split_bytes, "Their pieces' bytes, outside the plan above.")
      .field("chunked_ops", &R::chunked_ops, "Ops run as sub-ops on boxes of their work.")
      .field("chunks", &R::chunks)
      .field("chunk_staging_bytes", &R::chunk_staging_bytes,
             "Staging buffers the chunks copy their boxes through.");
  part.done();
  using T = MemorySummary;
  Record<T, R>(m, "MemoryReport",
               "Device memory of the delegate's live partitions, in bytes: PartitionMemory's "
               "fields summed over `partitions`. The *_total_bytes add weights (and fp16 "
               "staging copies; allocated_total_bytes also the split pieces and chunk staging).",
               part)
      .field("partitions", &T::partitions)
      .computed("naive_total_bytes", [](const T& t) { return t.naive_bytes + t.weight_bytes; })
      .computed("lower_bound_total_bytes",
                [](const T& t) { return t.lower_bound_bytes + t.weight_bytes; })
      .computed("allocated_total_bytes",
                [](const T& t) {
                  return t.allocated_bytes + t.weight_bytes + t.staging_bytes + t.split_bytes +
                         t.chunk_staging_bytes;
                })
      .computed(
          "arenas",
          [](const T& t) {
            std::set<std::string> kinds;
            for (const MemoryReport& p : t.partitions) kinds.insert(p.arena);
            return std::vector<std::string>(kinds.begin(), kinds.end());
          },
          "Where activations live, one entry per kind of partition arena, sorted.")
      .done();
}

void BindProfile(py::module_& m) {
  using K = KernelRecord;
  Record<K>(m, "KernelRecord", "One kernel's event times, summed over the invokes profiled.")
      .field("partition", &K::partition)
      .field("node", &K::node, "The TFLite node index.")
      .field("op", &K::op)
      .field("algorithm", &K::algorithm)
      .field("kernel", &K::kernel)
      .field("shape", &K::shape)
      .field("flops", &K::flops, "Per run.")
      .field("bytes", &K::bytes, "Per run: activations read and written, and weights.")
      .field("count", &K::count)
      .field("total_ns", &K::total_ns, "Event times less the per-event overhead.")
      .field("raw_ns", &K::raw_ns, "Event times as the driver reports them.")
      .done();
  using P = PartitionRecord;
  Record<P>(m, "PartitionRecord", "One partition's invokes, summed over those profiled.")
      .field("partition", &P::partition)
      .field("invokes", &P::invokes)
      .field("upload_ns", &P::upload_ns, "Device time from events.")
      .field("compute_ns", &P::compute_ns)
      .field("compute_raw_ns", &P::compute_raw_ns, "compute_ns before the per-event overhead.")
      .field("download_ns", &P::download_ns)
      .field("wall_ns", &P::wall_ns, "Host time of the whole invoke.")
      .field("enqueue_ns", &P::enqueue_ns, "Host time until the last command was enqueued.")
      .field("span_ns", &P::span_ns,
             "The device's span from the first command's start to the last one's end.")
      .field("upload_bytes", &P::upload_bytes)
      .field("download_bytes", &P::download_bytes)
      .field("kernels_per_invoke", &P::kernels_per_invoke)
      .done();
  using E = TraceEvent;
  Record<E>(m, "TraceEvent", "One command on the device's clock.")
      .field("name", &E::name, "The kernel's name, or 'upload' / 'download'.")
      .field("category", &E::category, "The op type, or 'transfer'.")
      .field("partition", &E::partition)
      .field("node", &E::node)
      .field("start_ns", &E::start_ns)
      .field("end_ns", &E::end_ns)
      .done();
  using Q = ProfileSnapshot;
  Record<Q>(m, "ProfileSnapshot", "The profiler's records so far (load(profiling=True)).")
      .field("enabled", &Q::enabled)
      .field("event_overhead_ns", &Q::event_overhead_ns,
             "What one event adds to the kernel time it reports on this device.")
      .field("kernels", &Q::kernels)
      .field("partitions", &Q::partitions)
      .field("trace", &Q::trace)
      .done();
}

}  // namespace

void RegisterRecords(py::module_& m) {
  BindDecisions(m);
  BindStats(m);
  BindMemory(m);
  BindProfile(m);
}

}  // namespace clgpu::python
