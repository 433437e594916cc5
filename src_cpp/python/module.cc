// The private extension clgpu_delegate._core: this file only registers.
#include <pybind11/pybind11.h>

#include "python/register.h"

PYBIND11_MODULE(_core, m) {
  m.doc() = "clgpu_delegate native core (private; use the clgpu_delegate package)";
  clgpu::python::RegisterErrors(m);
  clgpu::python::RegisterDevices(m);
  clgpu::python::RegisterRecords(m);  // before the functions that return them
  clgpu::python::RegisterDelegate(m);
  clgpu::python::RegisterKernels(m);
  clgpu::python::RegisterPlanner(m);
}
