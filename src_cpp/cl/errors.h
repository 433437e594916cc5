// OpenCL error codes -> names (table generated from the Khronos headers) and the
// checking helper every OpenCL call goes through.
#pragma once

#include <cstddef>
#include <string>

namespace clgpu {

struct ClErrorEntry {
  int code;
  const char* name;
};

// Generated from CL/cl.h and CL/cl_ext.h at build time (cmake/ClgpuErrorNames.cmake).
const ClErrorEntry* ClErrorNames(size_t* count);

// "CL_OUT_OF_RESOURCES" for -5; "CL_UNKNOWN_ERROR(-9999)" for codes the headers lack.
std::string ClErrorName(int code);

// Throws ClError naming `call` when code != CL_SUCCESS.
void CheckCl(int code, const char* call);

}  // namespace clgpu
