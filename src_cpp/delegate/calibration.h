// Measures the device side of the cost model (DeviceCosts, delegate/cost_model.h) on the
// delegate's own device and queue, once per device and driver in a process, and keeps the
// figures in serialization_dir for later processes. $CLGPU_CALIBRATION: "off" uses the
// constants; "force" measures CPU devices too (tests; the cost model declines those anyway).
#pragma once

#include <string>

#include "cl/environment.h"
#include "delegate/cost_model.h"

namespace clgpu {

// Back-to-back small kernels and buffer copies, the host's sync round trip, host <-> device
// bandwidth (pageable, and through a mapped host-pointer buffer) and multiply-add throughput,
// each the best of three tries (calibration_rig.cc). Throws Error / ClError; the figures are
// not checked for plausibility here (CalibratedDeviceCosts does).
DeviceCosts MeasureDeviceCosts(Environment& env, cl_command_queue queue);

// The lower of the driver's launch levels, us per small kernel in turn: batches of 64 and 8
// taking turns for `window_ms` (at least three of each, at most max_tries), the fastest of each
// (RefinedDeviceCosts). Throws Error / ClError.
double LowerLaunchLevelUs(Environment& env, cl_command_queue queue, double window_ms,
                          int max_tries);

// The figures for env's device: this process's earlier measurement ("cache"), else `dir`'s
// calibration file when `dir` is not empty ("file"), else a measurement on `queue`
// ("measured", stored in `dir`). The constants ("constants") for devices other than GPUs,
// with $CLGPU_CALIBRATION=off, and, with a warning, when measuring fails.
DeviceCosts CalibratedDeviceCosts(Environment& env, cl_command_queue queue, const std::string& dir);

// For a decision too close to call on c: the kernel figure measured again over a window long
// enough to meet the driver's lower launch level (docs/partitioning.md), once per device in a
// process and stored in `dir` when it is not empty. The lower level plus the difference between
// the two readings' levels, so that the cost model's constants fit both. c itself when it was
// not measured in this process (a stored figure gives every process the same decision already),
// is refined already, or measuring fails.
DeviceCosts RefinedDeviceCosts(Environment& env, cl_command_queue queue, const std::string& dir,
                               const DeviceCosts& c);

// dir/calibration-<hash of the device, driver and project version>.txt
std::string CalibrationPath(const DeviceInfo& dev, const std::string& dir);

}  // namespace clgpu
