#include "cl/device_profile.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace clgpu {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

bool Has(const std::string& haystack, const char* needle) {
  return haystack.find(needle) != std::string::npos;
}

// From CL_DEVICE_VENDOR first (the platform name names the ICD, PoCL for any CPU), then the
// device name (some Android drivers leave the vendor a number).
Vendor VendorOf(const DeviceFacts& f) {
  const std::string v = Lower(f.vendor), n = Lower(f.name);
  for (const std::string& s : {v, n}) {
    if (Has(s, "nvidia")) return Vendor::kNvidia;
    if (Has(s, "advanced micro devices") || Has(s, "amd") || Has(s, "gfx")) return Vendor::kAmd;
    if (Has(s, "intel")) return Vendor::kIntel;
    if (Has(s, "arm") || Has(s, "mali")) return Vendor::kArm;
    if (Has(s, "qualcomm") || Has(s, "adreno")) return Vendor::kQualcomm;
    if (Has(s, "apple")) return Vendor::kApple;
  }
  return Vendor::kOther;
}

// The characters of `s` from `pos` on that satisfy `keep` (a number or an ISA name after a word).
// Plain scanning, not std::regex: that crashed inside the extension on the GPU machine.
template <typename Keep>
std::string Run(const std::string& s, size_t pos, Keep keep) {
  size_t end = pos;
  while (end < s.size() && keep(static_cast<unsigned char>(s[end]))) ++end;
  return s.substr(pos, end - pos);
}

// Mali's generations by product number (Arm's published list): Midgard T6xx-T8xx, Bifrost
// G31/G51/G52/G71/G72/G76, Valhall G57/G68/G77/G78 and G310-G710, 5th generation G620/G720 on.
std::string MaliArchitecture(const std::string& name) {
  const std::string n = Lower(name);
  size_t at = n.find("mali");
  if (at == std::string::npos) return "";
  at += 4;
  if (at < n.size() && (n[at] == '-' || n[at] == ' ')) ++at;
  if (at >= n.size()) return "";
  if (n[at] == 't') return "midgard";
  const std::string digits = Run(n, at + 1, ::isdigit);
  if (n[at] != 'g' || digits.empty() || digits.size() > 4) return "";
  const int g = std::atoi(digits.c_str());
  if (g == 31 || g == 51 || g == 52 || g == 71 || g == 72 || g == 76) return "bifrost";
  if (g == 620 || g >= 720) return "5th-gen";
  return "valhall";
}

std::string ArchitectureOf(const DeviceFacts& f, Vendor v) {
  const std::string n = Lower(f.name + " " + f.amd_board);
  switch (v) {
    case Vendor::kNvidia:
      return f.nv_compute_major > 0
                 ? "sm_" + std::to_string(f.nv_compute_major) + std::to_string(f.nv_compute_minor)
                 : "";
    case Vendor::kAmd: {  // ROCm names the device by its ISA ("gfx1100")
      const size_t at = n.find("gfx");
      const std::string isa = at == std::string::npos ? "" : Run(n, at + 3, ::isxdigit);
      return isa.empty() ? "" : "gfx" + isa;
    }
    case Vendor::kIntel:
      if (f.type != "gpu") return "";
      return Has(n, "arc") || Has(n, "xe") || Has(n, "data center gpu") ? "xe" : "gen";
    case Vendor::kArm:
      return MaliArchitecture(f.name);
    case Vendor::kQualcomm: {  // "QUALCOMM Adreno(TM) 740" -> adreno7xx
      size_t at = n.find("adreno");
      if (at == std::string::npos) return "";
      at = n.find_first_of("0123456789", at);
      const std::string digits = at == std::string::npos ? "" : Run(n, at, ::isdigit);
      return digits.size() == 3 ? "adreno" + digits.substr(0, 1) + "xx" : "";
    }
    default:
      return "";
  }
}

}  // namespace

const char* VendorKey(Vendor v) {
  switch (v) {
    case Vendor::kNvidia:
      return "nvidia";
    case Vendor::kAmd:
      return "amd";
    case Vendor::kIntel:
      return "intel";
    case Vendor::kArm:
      return "arm";
    case Vendor::kQualcomm:
      return "qualcomm";
    case Vendor::kApple:
      return "apple";
    default:
      return "other";
  }
}

DeviceProfile MakeDeviceProfile(const DeviceFacts& f) {
  DeviceProfile p;
  p.vendor = VendorOf(f);
  p.architecture = ArchitectureOf(f, p.vendor);
  p.gpu = f.type == "gpu";
  p.cpu = f.type == "cpu";
  p.integer_dot_product =
      Has(f.extensions, "cl_khr_integer_dot_product") || Has(f.extensions, "cl_arm_integer_dot");
  p.subgroups = Has(f.extensions, "cl_khr_subgroups") || Has(f.extensions, "cl_intel_subgroups");
  p.unified_memory = f.host_unified_memory;

  const bool nvidia_gpu = p.gpu && p.vendor == Vendor::kNvidia;
  p.gpu_plans = p.gpu;
  p.zero_copy_io = p.unified_memory || nvidia_gpu;
  p.auto_fp16 = p.gpu;
  p.shared_arena = p.vendor == Vendor::kNvidia;
  p.decline_partitions = p.cpu;
  p.nvidia_ptx = nvidia_gpu;
  p.event_target_ns = p.gpu ? 40e3 : 400e3;
  p.measure_costs = p.gpu;
  p.fill_items_per_unit = p.gpu ? 4096 : 256;
  p.split_k_last_max = p.nvidia_ptx ? 4 : 0;
  // gemm, fused, split, small and the invoke: fitted together on an H200's real models
  // (bench/results/launch-costs-invoke-NVIDIA_H200.md); the kinds alone had models of 3-7
  // kernels at 0.6-0.8 of their measured time.
  if (nvidia_gpu && p.architecture == "sm_90") {
    p.launch_us = {7, 10, 5, 7.5};
    p.invoke_us = 9;
    p.split_k_last_us = 1.2, p.split_k_last_ns_per_sum = 55;
    p.expand_chain_cap_int8 = 576;
    // The grid chain's figures: bench/results/ds-grid-fit-NVIDIA_H200.md.
    p.ds_grid_stage_us = 6, p.ds_grid_step_us = 0.24;
    // The dense chain's: bench/results/dense-grid-fit-NVIDIA_H200.md.
    p.dense_grid_stage_us = 4.2, p.dense_grid_gbps = 5000, p.dense_grid_hidden_us = 11;
    // The H200's and H100's L2 holds 50 MB.
    p.dense_grid_max_mb = 40;
  }

  const std::string vendor = VendorKey(p.vendor);
  if (!p.architecture.empty()) {
    p.tuning_keys.push_back(vendor + "/" + p.architecture + "/" + f.name);
    p.tuning_keys.push_back(vendor + "/" + p.architecture);
  }
  if (p.gpu) {
    p.tuning_keys.push_back(vendor);
    p.tuning_keys.push_back("gpu");
  } else {
    p.tuning_keys.push_back("cpu");
  }
  return p;
}

}  // namespace clgpu
