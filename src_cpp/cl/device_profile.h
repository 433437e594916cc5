// What the rest of the delegate knows of a device: who made it, its architecture, what it can
// do, and every device-dependent choice, each made here once. Code outside this file reads the
// profile's fields; it does not test vendor strings or device types itself. A new vendor or
// architecture is an entry in MakeDeviceProfile (and rows in ops/tuning.cc's tables, keyed by
// `tuning_keys`).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace clgpu {

enum class Vendor { kNvidia, kAmd, kIntel, kArm, kQualcomm, kApple, kOther };

// "nvidia", "amd", "intel", "arm", "qualcomm", "apple", "other".
const char* VendorKey(Vendor v);

// What the OpenCL queries say of a device, the profile's only input (tests build it by hand).
struct DeviceFacts {
  std::string vendor, name, platform, type;        // type: "gpu", "cpu", "accelerator", "other"
  std::string extensions;                          // CL_DEVICE_EXTENSIONS
  int nv_compute_major = 0, nv_compute_minor = 0;  // cl_nv_device_attribute_query, else 0
  std::string amd_board;                           // CL_DEVICE_BOARD_NAME_AMD, else ""
  bool host_unified_memory = false;
};

// A kernel launch as the cost model counts it (delegate/cost_model.cc): a GEMM-like op's kernel,
// one that also computes a folded depthwise or a whole block (a longer chain per work-item), a
// split reduction's further launches, and the rest (element-wise, pooling, layout, copies).
enum LaunchKind { kGemmLaunch, kFusedLaunch, kSplitLaunch, kSmallLaunch, kLaunchKinds };

struct DeviceProfile {
  Vendor vendor = Vendor::kOther;
  // The vendor's architecture, as far as the queries tell: "sm_90" (NVIDIA compute
  // capability), "gfx1100" (AMD, from the device name), "xe" / "gen" (Intel), "valhall" /
  // "bifrost" / "midgard" / "5th-gen" (Arm Mali), "adreno6xx" (Qualcomm); "" when unknown.
  std::string architecture;
  bool gpu = false;  // CL_DEVICE_TYPE_GPU
  bool cpu = false;  // CL_DEVICE_TYPE_CPU (PoCL, Intel's CPU runtime)

  // --- capabilities ---
  bool integer_dot_product = false;  // cl_khr_integer_dot_product / cl_arm_integer_dot_product_*
  bool subgroups = false;            // cl_khr_subgroups / cl_intel_subgroups
  bool unified_memory = false;       // the device works in the host's memory

  // --- choices ---
  // Plans sized for a GPU's many compute units: the convolution selector's GPU algorithms
  // (implicit GEMM on wide 1x1 layers, the blocked direct and fused Winograd kernels), split-K
  // GEMMs, the calibration's work sizes.
  bool gpu_plans = false;
  // zero_copy="auto": host-pointer buffers for partition inputs and outputs. Unified memory, and
  // NVIDIA GPUs, where such a buffer is pinned once (docs/performance.md).
  bool zero_copy_io = false;
  // precision="auto" stores activations as fp16 (a GPU; a CPU device only when asked).
  bool auto_fp16 = false;
  // One shared (or SVM) arena with offsets instead of sub-buffers of one buffer (NVIDIA,
  // measured; other drivers keep the portable sub-buffers).
  bool shared_arena = false;
  // The cost model declines every partition: the OpenCL device is the CPU itself, where the
  // runtime's own CPU kernels are faster.
  bool decline_partitions = false;
  // NVIDIA's own paths: PTX in kernels (dp4a), binaries through the PTX JIT cache.
  bool nvidia_ptx = false;
  // The profiler's event calibration: runs long enough that the device, not the host's enqueue,
  // sets the pace.
  double event_target_ns = 400e3;
  // The cost model measures the device's launch and transfer costs once (calibration) rather
  // than assume them: GPUs (a CPU device is declined before any figure is read).
  bool measure_costs = false;
  // The calibration's arithmetic kernel: work-items per compute unit that fill it.
  int fill_items_per_unit = 256;
  // Expand folds (fusion/expand.cc) repeat at most this many products (taps x EC) per depthwise
  // element: measured on NVIDIA sm_90 (bench/results/ab-options-chain-NVIDIA_H200.md), the same
  // for other devices until measured there.
  long expand_chain_cap = 216;
  // The same for the int8 GEMM's EXPAND_A, whose chain is of dp4a steps over four channels: on
  // NVIDIA sm_90 blocks of 288-576 ran as fast folded or faster (0.75-0.96x the two launches;
  // bench/results/ab-options-int8-chain-NVIDIA_H200.md). The int8 block kernel still takes the
  // blocks past expand_chain_cap that it plans. Elsewhere expand_chain_cap until measured.
  long expand_chain_cap_int8 = 216;
  // The block kernels (kernels/inverted_residual*.cl) take a block only while its expand costs a
  // group's work-items at most this many products each (input pixels x C x EC / 256): past it a
  // block's few groups (one per output row or so) ran slower than the GEMMs' many. NVIDIA sm_90
  // (bench/results/ab-options-block-sweep-*.md): the blocks at 169 ran faster, those at 432 and
  // more slower; 300 lies between. The same elsewhere until measured.
  long block_item_products = 300;
  // Split convolutions of up to this many splits also get the form in which the split kernel
  // sums the splits itself (one launch, a little more device time; ops/gemm.h
  // SplitKLastOffered), which a partition measures against the other (runtime/launch_forms.h).
  // Its last group reads the others' plain stores: only where PTX's membar.gl and L2 loads make
  // them visible (nvidia_ptx; OpenCL 1.2's fences order one work-item's accesses, nothing
  // across work-groups). There 4, measured on sm_90 (bench/results/ab-options-splitk-inkernel-
  // v3-*: more splits ran 1.4-1.8x slower); elsewhere 0.
  int split_k_last_max = 0;
  // What that form costs a split convolution beyond its split kernel's launch, in the cost
  // model's terms (us): a part per launch (the fence, the tile counter's atomic, the last
  // group's epilogue) and one per partial sum that each of the last group's work-items reads
  // back, (splits - 1) x its outputs (WM x WN), one after another; the group's work-items read
  // theirs side by side. The partition keeps the faster form, so the estimate counts this where it
  // is less than the split's further launch (delegate/cost_model.cc). NVIDIA sm_90, fitted on
  // the pairs of both forms (docs/partitioning.md, "The one-launch form in the estimate"); 0
  // elsewhere: the estimate counts the two launches.
  double split_k_last_us = 0, split_k_last_ns_per_sum = 0;
  // The depthwise-separable chain's grid form (kernels/ds_chain_grid.cl): a block's fixed time
  // in it and the time of each of its steps (us; ops/ds_chain.cc's DsGridBlockUs). 0: no grid
  // form. Its groups wait for one another, sound only where they hand over through PTX's fences
  // (nvidia_ptx): NVIDIA sm_90, fitted on the H200 (docs/performance.md); elsewhere 0 until
  // measured.
  double ds_grid_stage_us = 0, ds_grid_step_us = 0;
  // The dense chain's grid form (kernels/dense_chain_grid.cl): a layer's fixed device time in it
  // (us: the barrier, its input into local memory, the lanes' tree) and the rate its groups read
  // weights at (GB/s), both fitted to the kernel's event times; what of a kernel's device time
  // the fused launch's floor already holds (us, fitted to invokes' wall times); and the most
  // weights (MB) a chain takes, so that they stay in the device's cache between invokes, where
  // the figures were fitted (ops/dense_chain.cc). 0: no such form. Sound where the DS grid's is:
  // NVIDIA sm_90, fitted on the H200 (docs/performance.md); elsewhere 0.
  double dense_grid_stage_us = 0, dense_grid_gbps = 0, dense_grid_hidden_us = 0;
  double dense_grid_max_mb = 0;
  // What one launch of each kind adds to an invoke (us, the host's enqueue and the device's run
  // with the gap to the next), fitted on real models' wall times on the device
  // (bench/fit_launch_costs.py); all 0 where none was fitted: the cost model then counts the
  // calibration's small kernel, a figure that varied 30 % between processes of one H200.
  std::array<double, kLaunchKinds> launch_us{};
  // What an invoke costs beyond its launches and the calibrated sync round trip (us: the
  // delegate's invoke path, its inputs and outputs through TFLite), fitted with launch_us; a
  // model of a few kernels feels it most. 0 where none was fitted.
  double invoke_us = 0;
  // The tuning tables' keys, most specific first: "<vendor>/<architecture>/<device name>",
  // "<vendor>/<architecture>", "<vendor>", then "gpu" (any GPU) or "cpu" (any other device).
  std::vector<std::string> tuning_keys;
};

DeviceProfile MakeDeviceProfile(const DeviceFacts& facts);

}  // namespace clgpu
