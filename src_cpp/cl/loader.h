// OpenCL is loaded at run time with dlopen and used through this function table,
// so the same binary works with any ICD (and on phones) and nothing links libOpenCL.
#pragma once

#ifndef CL_USE_DEPRECATED_OPENCL_1_2_APIS
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#endif
#include <CL/cl.h>

#include <string>

namespace clgpu {

// X-macro list of every OpenCL entry point the project uses.
#define CLGPU_CL_FUNCTIONS(X)    \
  X(clGetPlatformIDs)            \
  X(clGetPlatformInfo)           \
  X(clGetDeviceIDs)              \
  X(clGetDeviceInfo)             \
  X(clCreateContext)             \
  X(clRetainContext)             \
  X(clReleaseContext)            \
  X(clCreateCommandQueue)        \
  X(clRetainCommandQueue)        \
  X(clReleaseCommandQueue)       \
  X(clCreateBuffer)              \
  X(clCreateSubBuffer)           \
  X(clRetainMemObject)           \
  X(clReleaseMemObject)          \
  X(clGetMemObjectInfo)          \
  X(clCreateProgramWithSource)   \
  X(clCreateProgramWithBinary)   \
  X(clBuildProgram)              \
  X(clGetProgramInfo)            \
  X(clGetProgramBuildInfo)       \
  X(clRetainProgram)             \
  X(clReleaseProgram)            \
  X(clCreateKernel)              \
  X(clRetainKernel)              \
  X(clReleaseKernel)             \
  X(clSetKernelArg)              \
  X(clGetKernelInfo)             \
  X(clGetKernelWorkGroupInfo)    \
  X(clEnqueueNDRangeKernel)      \
  X(clEnqueueReadBuffer)         \
  X(clEnqueueWriteBuffer)        \
  X(clEnqueueCopyBuffer)         \
  X(clEnqueueCopyBufferRect)     \
  X(clEnqueueFillBuffer)         \
  X(clEnqueueMapBuffer)          \
  X(clEnqueueUnmapMemObject)     \
  X(clEnqueueMarkerWithWaitList) \
  X(clFlush)                     \
  X(clFinish)                    \
  X(clWaitForEvents)             \
  X(clGetEventInfo)              \
  X(clGetEventProfilingInfo)     \
  X(clRetainEvent)               \
  X(clReleaseEvent)

// OpenCL 2.0 entry points the project can do without (declared here: the build
// targets the 1.2 headers). Null where the library lacks them; callers check.
using SvmAllocFn = void*(CL_API_CALL*)(cl_context, cl_bitfield, size_t, cl_uint);
using SvmFreeFn = void(CL_API_CALL*)(cl_context, void*);

struct ClApi {
#define CLGPU_DECLARE_FN(name) decltype(&::name) name = nullptr;
  CLGPU_CL_FUNCTIONS(CLGPU_DECLARE_FN)
#undef CLGPU_DECLARE_FN
  SvmAllocFn clSVMAlloc = nullptr;
  SvmFreeFn clSVMFree = nullptr;
  std::string library_path;  // the file that was loaded
};

// Loads the OpenCL library once per process (thread-safe) and returns the table.
// Search order: $CLGPU_OPENCL_LIBRARY, libOpenCL.so.1, libOpenCL.so, then the
// Android vendor/system locations. Throws NoDeviceError with an install hint.
const ClApi& Cl();

// Test hook: forget the loaded library so the next Cl() searches again (the
// handle itself stays open: function pointers may still be in use elsewhere).
void ResetClForTesting();

}  // namespace clgpu
