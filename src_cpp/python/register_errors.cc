// C++ exceptions -> the Python exception classes of clgpu_delegate._errors.
#include <pybind11/pybind11.h>

#include "common/error.h"
#include "python/register.h"

namespace py = pybind11;

namespace clgpu::python {

void RegisterErrors(py::module_& m) {
  py::module_ errors = py::module_::import("clgpu_delegate._errors");
  // Keep the classes alive for the translator (module objects outlive it anyway).
  m.attr("_errors") = errors;
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    py::module_ e = py::module_::import("clgpu_delegate._errors");
    auto raise = [&](const char* cls, const char* what) {
      PyErr_SetString(e.attr(cls).ptr(), what);
    };
    try {
      std::rethrow_exception(p);
    } catch (const OptionError& x) {
      PyErr_SetString(PyExc_ValueError, x.what());
    } catch (const NoDeviceError& x) {
      raise("NoDeviceError", x.what());
    } catch (const BuildError& x) {
      raise("BuildError", x.what());
    } catch (const ClError& x) {
      raise("OpenCLError", x.what());
    } catch (const Error& x) {
      raise("ClgpuError", x.what());
    }
  });
}

}  // namespace clgpu::python
