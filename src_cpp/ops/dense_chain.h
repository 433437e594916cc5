// Chains of batch-1 float FULLY_CONNECTED layers (each layer's output read by the next alone: a
// dense stack, a classifier's MLP head) run in one launch of work-groups across the GPU that wait
// for one another between layers (kernels/dense_chain_grid.cl). fusion/dense_chain.cc decides
// which chains; the plan and the time of the form are here.
#pragma once

#include <optional>
#include <vector>

#include "cl/device.h"
#include "ops/op.h"
#include "ops/squeeze.h"

namespace clgpu {

// A layer as the plan sees it: its outputs and inputs (one row).
struct DenseLayerShape {
  int n = 0, k = 0;
};

// How the kernel runs a chain, or nullopt where it cannot: where the device profile has figures
// for it (dense_grid_stage_us) and its groups' hand-over is sound (ops/ds_chain.h's
// GridSyncSound), or $CLGPU_DENSE_GRID=1 (tests); every K a multiple of 4, the widest input in
// local memory, and the weights within the profile's dense_grid_max_mb. `groups` <= the compute
// units, so that all are resident at once.
struct DenseChainPlan {
  size_t wg = 0;
  int groups = 0;
  std::vector<int> lanes;  // per layer, work-items per output column
  long act_floats = 0;     // each of the two buffers between layers
  size_t local_floats = 0;
  std::vector<double> layer_us;  // each layer's device time in the form
};
std::optional<DenseChainPlan> PlanDenseChain(const DeviceInfo& dev,
                                             const std::vector<DenseLayerShape>& layers);

// What the chain adds to an invoke beyond its fused launch's floor (us): its layers' device
// time less what that floor already holds of a kernel's (dense_grid_hidden_us); nullopt where it
// cannot run.
std::optional<double> DenseChainUs(const DeviceInfo& dev,
                                   const std::vector<DenseLayerShape>& layers);

// Whether a layer is worth its place in a chain: its device time in the form under the launch
// its own kernel takes (whose device time hides behind the host's next enqueue).
bool DenseLayerPays(const DeviceInfo& dev, const DenseLayerShape& layer);

// The chain's launch (layers in order, each one row in), reading `in` and writing `out`; its
// constants (float32) and the buffers between layers kept by the launch. Empty where the device
// cannot run the form after all (a group the compiler cannot fit).
std::vector<Launch> EncodeDenseChain(OpContext& ctx, const std::vector<FloatDense>& layers,
                                     cl_mem in, cl_mem out);

}  // namespace clgpu
