// The one error mechanism inside src_cpp: exceptions derived from clgpu::Error.
// They are translated only at the edges (TFLite C boundary, pybind11 module).
#pragma once

#include <stdexcept>
#include <string>
#include <typeinfo>

namespace clgpu {

// A value quoted in an error message: bytes outside printable ASCII as \xNN and at most 64
// characters of it (the rest counted), so a message stays one short line whatever the value.
inline std::string Shown(const std::string& v) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < v.size() && i < 64; ++i) {
    const unsigned char c = static_cast<unsigned char>(v[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (v.size() > 64) out += "... (" + std::to_string(v.size()) + " bytes)";
  return out;
}

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// No usable OpenCL library, platform or device; the message says what to install.
class NoDeviceError : public Error {
 public:
  using Error::Error;
};

// A failing OpenCL call: names the call and the error.
class ClError : public Error {
 public:
  ClError(const std::string& call, int code, const std::string& detail = "");
  int code() const { return code_; }
  const std::string& call() const { return call_; }

 private:
  std::string call_;
  int code_;
};

// A program that failed to compile: carries the kernel name, options and build log.
class BuildError : public Error {
 public:
  BuildError(const std::string& program, const std::string& options, const std::string& log);
  const std::string& log() const { return log_; }

 private:
  std::string log_;
};

// A bad delegate option (Python: ValueError; plugin: NULL + report_error).
class OptionError : public Error {
 public:
  using Error::Error;
};

// What an exception says, never "" (a reason or message must name something): its type
// when it carries no text.
inline std::string What(const std::exception& e) {
  const char* w = e.what();
  return w && *w ? std::string(w)
                 : std::string("an error without a message (") + typeid(e).name() + ")";
}

}  // namespace clgpu
