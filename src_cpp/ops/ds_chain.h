// Chains of depthwise-separable blocks (a depthwise of depth multiplier 1 and stride 1 keeping
// the map's size, then a 1x1 convolution) on a small map, run in one launch: by one work-group
// per image (kernels/ds_chain.cl), or by groups across the GPU that wait for one another between
// blocks (kernels/ds_chain_grid.cl); fusion/ds_chain.cc decides which chains, the time of each
// form here which form.
#pragma once

#include <optional>
#include <vector>

#include "cl/device.h"
#include "ops/conv2d_selector.h"
#include "ops/conv_geometry.h"
#include "ops/op.h"
#include "ops/squeeze.h"

namespace clgpu {

// One block as the kernel takes it: the depthwise's form and the 1x1's weights [OC][C].
struct DsChainBlock {
  FloatDepthwiseA dw;
  FloatDense pw;
};

// A block as the plan sees it: its depthwise's geometry and the 1x1's outputs.
struct DsBlockShape {
  ConvGeometry dw;
  int oc = 0;
};

// How the kernel runs a chain in a group of `wg` work-items (kernels/ds_chain.cl's defines and
// local memory), or nullopt where it cannot: each block of stride 1 keeping the map's size,
// channel counts in fours, the map's activations, each block's depthwise constants and biases and
// at least four rows of its 1x1's weights in local memory.
struct DsChainPlan {
  size_t wg = 0;
  int x_floats = 0;       // the activations
  int k_floats = 0;       // the largest block's constants
  std::vector<int> rows;  // per block, its 1x1's weight rows held at a time
  int dwpt = 1, pwt = 1;  // DSC_DWPT, DSC_PWT
  int pf = 1;             // DSC_PF
};
std::optional<DsChainPlan> PlanDsChain(const DeviceInfo& dev,
                                       const std::vector<DsBlockShape>& blocks, size_t wg = 0);

// Whether this device's work-groups can wait for one another within a launch (group_sync.cl's
// grid_barrier): PTX's fences and L2 loads probed on an NVIDIA GPU, or a CPU device (tests). And
// the defines its programs take for it.
bool GridSyncSound(const DeviceInfo& dev);
std::string GridSyncDefines(const DeviceInfo& dev);

// How the grid form runs a chain (kernels/ds_chain_grid.cl), or nullopt where it cannot: where
// the device profile has a figure for it (ds_grid_stage_us) and its groups' hand-over is sound
// (PTX's fences and L2 loads, or a CPU device), or $CLGPU_DS_GRID=1 (tests); each block as
// PlanDsChain asks, but the activations in global memory. `groups` <= the compute units, so
// that all are resident at once: each group waits for every other at each block's end.
struct DsGridPlan {
  size_t wg = 256;
  int groups = 0, pixels = 0;  // pixels per group: of the powers of 2, the fastest by the figures
  int lanes = 1;               // work-items per output quad of the 1x1s
  long act_floats = 0;         // each of the two buffers between blocks
  size_t local_floats = 0;
  std::vector<double> block_us;  // each block's time (DsGridBlockUs)
};
std::optional<DsGridPlan> PlanDsGrid(const DeviceInfo& dev,
                                     const std::vector<DsBlockShape>& blocks);

// The form a chain runs in and its device time (us): the faster of the two that can run it, or
// nullopt where neither can.
struct DsChainChoice {
  bool grid = false;
  double us = 0;
};
std::optional<DsChainChoice> ChooseDsChain(const DeviceInfo& dev,
                                           const std::vector<DsBlockShape>& blocks);

// The device time (us) one work-group spends on such a block: a latency per stage and the
// arithmetic at one compute unit's rate.
double DsBlockUs(const DeviceInfo& dev, const ConvGeometry& dw, int oc);
// Whether a block is worth running in a chain: its time in one group under the fused launch it
// saves, or its time in the grid form under 0.8 of the launches its folded GEMM would take.
bool DsBlockPays(const DeviceInfo& dev, const ConvGeometry& dw, int oc);

// The chain's launch (blocks in order, each block's input of the geometry in its form), reading
// `in` and writing `out`; the constants and scratch image kept by the launch.
std::vector<Launch> EncodeDsChain(OpContext& ctx, const std::vector<DsChainBlock>& blocks,
                                  cl_mem in, cl_mem out);

}  // namespace clgpu
