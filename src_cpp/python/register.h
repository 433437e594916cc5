// One register function per area of the _core module.
#pragma once

#include <pybind11/pybind11.h>

namespace clgpu {
struct DeviceInfo;
namespace python {

// A device record as the Python dict devices() returns.
pybind11::dict DeviceDict(const DeviceInfo& d);

void RegisterErrors(pybind11::module_& m);
void RegisterDevices(pybind11::module_& m);
void RegisterDelegate(pybind11::module_& m);
void RegisterKernels(pybind11::module_& m);
void RegisterPlanner(pybind11::module_& m);

}  // namespace python
}  // namespace clgpu
