// One register function per area of the _core module.
#pragma once

#include <pybind11/pybind11.h>

#include <string>
#include <utility>

#include "cl/device.h"

namespace clgpu::python {

// A device as Python's clgpu_delegate.Device (register_devices.cc binds it): what the
// delegate knows of it, and the int8 dot-product path where that was probed.
struct DeviceRecord : DeviceInfo {
  explicit DeviceRecord(const DeviceInfo& d, std::string dot = "")
      : DeviceInfo(d), int8_dot(std::move(dot)) {}
  std::string int8_dot;
};

void RegisterErrors(pybind11::module_& m);
void RegisterDevices(pybind11::module_& m);
void RegisterRecords(pybind11::module_& m);
void RegisterDelegate(pybind11::module_& m);
void RegisterKernels(pybind11::module_& m);
void RegisterPlanner(pybind11::module_& m);

}  // namespace clgpu::python
