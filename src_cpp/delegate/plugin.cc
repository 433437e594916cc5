// The TFLite external-delegate plugin entry points (load_delegate,
// benchmark_model --external_delegate_path). No exception crosses this boundary:
// failures become NULL + report_error.
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/process_lock.h"
#include "delegate/delegate.h"

#define CLGPU_EXPORT extern "C" __attribute__((visibility("default")))

CLGPU_EXPORT TfLiteDelegate* tflite_plugin_create_delegate(const char* const* keys,
                                                           const char* const* values,
                                                           size_t num_options,
                                                           void (*report_error)(const char*)) {
  try {
    // The strings are temporaries of the caller: copy them now.
    std::vector<std::pair<std::string, std::string>> kv;
    for (size_t i = 0; i < num_options; ++i)
      kv.emplace_back(keys[i] ? keys[i] : "", values[i] ? values[i] : "");
    return clgpu::DelegateCore::Create(clgpu::ParseOptions(kv));
  } catch (const std::exception& e) {
    // report_error is only valid during this call; never keep it.
    if (report_error) report_error(("clgpu_delegate: " + clgpu::What(e)).c_str());
  } catch (...) {
    if (report_error) report_error("clgpu_delegate: unknown error");
  }
  return nullptr;
}

// The process's lock around the OpenCL driver's first use (common/process_lock.h), for the other
// copy of this code in a Python process (the extension), which loads this library to find it.
CLGPU_EXPORT void clgpu_driver_lock(int acquire) { clgpu::LocalDriverLock(acquire); }

CLGPU_EXPORT void tflite_plugin_destroy_delegate(TfLiteDelegate* delegate) {
  clgpu::DelegateCore::Destroy(delegate);  // NULL after a failed create
}
