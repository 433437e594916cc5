// The rules the block kernels (kernels/inverted_residual*.cl) and the GEMMs' EXPAND_A share:
// which blocks each may take, and their research knobs (bench/ab_options.py env.*), read at
// each use since ab_options sets them between delegates.
#include <vector>

#include "common/env.h"
#include "ops/conv2d_selector.h"

namespace clgpu {

long ExpandChainCap(const DeviceInfo& dev, bool int8) {
  const auto positive = [](const std::vector<double>& x) { return WholeAtLeast(x, 1); };
  if (int8) {
    const std::vector<double> v8 =
        EnvNumbers("CLGPU_EXPAND_CHAIN_INT8", 1, "a positive integer", positive);
    if (!v8.empty()) return static_cast<long>(v8[0]);
  }
  const std::vector<double> v = EnvNumbers("CLGPU_EXPAND_CHAIN", 1, "a positive integer", positive);
  if (!v.empty()) return static_cast<long>(v[0]);
  return int8 ? dev.profile.expand_chain_cap_int8 : dev.profile.expand_chain_cap;
}

// 256: both block kernels' work-group.
bool BlockItemsFit(const DeviceInfo& dev, long in_pixels, long c, long ec) {
  const std::vector<double> v =
      EnvNumbers("CLGPU_IR_BLOCK_ITEM", 1, "a positive integer",
                 [](const std::vector<double>& x) { return WholeAtLeast(x, 1); });
  const long cap = v.empty() ? dev.profile.block_item_products : static_cast<long>(v[0]);
  return in_pixels * c * ec <= cap * 256;
}

long BlockChunkCap() {
  const std::vector<double> cap = EnvNumbers(
      "CLGPU_IR_BLOCK_CHUNK", 1, "a positive multiple of 4",
      [](const std::vector<double>& x) { return WholeAtLeast(x, 4) && long(x[0]) % 4 == 0; });
  return cap.empty() ? 0 : long(cap[0]);
}

bool BlockKernelAllowed() { return EnvSwitch("CLGPU_IR_BLOCK").value_or(true); }

}  // namespace clgpu
