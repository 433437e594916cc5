// Delegate options: one parser for both paths (Python load() and the plugin's
// key/value strings). Names follow TFLite's GPU delegate where the meaning is the same.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fusion/pass.h"

namespace clgpu {

// The options with a fixed set of values, parsed once (their names are the option strings).
// fp32 | fp16 (fp16 storage, fp32 accumulation) | auto (fp16 on GPUs, else fp32)
enum class Precision { kFp32, kFp16, kAuto };
// cost: leave on the CPU what the cost model says would not win; all: claim every supported
// node; none: claim nothing (a measured plan found the CPU alone fastest).
enum class Partitioning { kCost, kAll, kNone };
// auto: on devices that share memory with the host (and NVIDIA's, DeviceProfile); on; off.
enum class ZeroCopy { kAuto, kOn, kOff };

struct Options {
  std::string device = "auto";  // auto | gpu | cpu | <index> | <name substring>
  Precision precision = Precision::kFp32;
  int max_delegated_partitions = 0;  // 0 = no limit; else keep the largest N
  bool profiling = false;            // time every kernel and transfer with events
  // $CLGPU_PARTITIONING changes the default (the test suite sets "all").
  Partitioning partitioning = Partitioning::kCost;
  // Test and benchmark hook: force one convolution algorithm when it applies.
  std::string conv_algorithm = "auto";
  // Test hook: split every tiled GEMM into this many K slices (0 = automatic).
  int gemm_splits = 0;
  // The fold passes a plan applies (fusion/pass.h's table, by name): ops run inside the kernel
  // of the op before them, a launch fewer each. Option `fuse`: "all", "none" or a
  // comma-separated list of names; `fuse_add` (the older option): true = "all", false = "none".
  // Off (empty), layer norms also stay apart.
  std::vector<std::string> fuse = FusionPassNames();
  bool fuse_add() const { return !fuse.empty(); }
  // Partition inputs/outputs use TFLite's own memory (CL_MEM_USE_HOST_PTR + map)
  // instead of copies: auto = on devices that share memory with the host.
  ZeroCopy zero_copy = ZeroCopy::kAuto;
  // Lowers the device's max allocation (0 = the device's own), to exercise the
  // code that splits work around it on small models.
  uint64_t max_alloc_bytes = 0;
  // Debugging (check_precision): after each invoke, copy every activation of
  // every partition back to the host, readable with Delegate.captured().
  bool capture_tensors = false;
  // A partition runs TFLite's own CPU kernels for its nodes while its programs build on a
  // thread of its own, and the device as soon as they are ready (an invoke in flight then
  // finishes there): the interpreter is usable at once on a cold start
  // (runtime/cpu_fallback.h). $CLGPU_CPU_WARMUP changes the default (the test suite sets 0).
  bool cpu_warmup = true;
  // precision auto picks fp16 on any device, as on a GPU: $CLGPU_AUTO_FP16=1 (tests, PoCL).
  bool auto_fp16_anywhere = false;
  std::string runtime;  // set by the Python shim: which interpreter package
  // Compiled program binaries are kept in serialization_dir[/model_token] (TFLite
  // GPU's names), so later starts skip the OpenCL compiler.
  std::string serialization_dir, model_token;

  // Test-only fault injection: create | prepare | init | build | alloc | invoke | read |
  // cache (cached binaries are corrupted after validation, before the driver sees them).
};

// Throws OptionError naming the valid keys / values.
Options ParseOptions(const std::vector<std::pair<std::string, std::string>>& kv);

// "key=value, ..." of the effective options (inspect, logs).
std::string DescribeOptions(const Options& o);

// The list of keys, for error messages and the Python layer.
const std::vector<std::string>& OptionKeys();

}  // namespace clgpu
