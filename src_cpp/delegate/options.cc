#include "delegate/options.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "common/env.h"
#include "common/error.h"
#include "ops/conv2d_selector.h"

namespace clgpu {
namespace {

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

void OneOf(const std::string& key, const std::string& value,
           const std::vector<std::string>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), value) == allowed.end())
    throw OptionError("invalid value '" + Shown(value) + "' for option '" + Shown(key) +
                      "'; valid values: " + Join(allowed));
}

bool ParseBool(const std::string& key, const std::string& v) {
  if (v == "true" || v == "1" || v == "True" || v == "on") return true;
  if (v == "false" || v == "0" || v == "False" || v == "off") return false;
  throw OptionError("invalid value '" + Shown(v) + "' for option '" + Shown(key) +
                    "'; expected true or false");
}

int ParseNonNegativeInt(const std::string& key, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  long x = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end || errno || x < 0 || x > 1 << 30)
    throw OptionError("invalid value '" + Shown(v) + "' for option '" + Shown(key) +
                      "'; expected a non-negative integer");
  return static_cast<int>(x);
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The delegate makes serialization_dir itself, never its parents: a mistyped path would
// otherwise leave a tree of directories behind (and '~' is not expanded here: it would be
// made in the working directory).
void CheckSerializationDir(const std::string& dir) {
  if (dir.empty() || IsDirectory(dir)) return;
  struct stat st;
  if (stat(dir.c_str(), &st) == 0)
    throw OptionError("option 'serialization_dir': " + Shown(dir) +
                      " exists and is not a directory");
  std::string parent = dir;
  while (parent.size() > 1 && parent.back() == '/') parent.pop_back();
  const size_t slash = parent.rfind('/');
  parent = slash == std::string::npos ? "." : slash == 0 ? "/" : parent.substr(0, slash);
  if (!IsDirectory(parent))
    throw OptionError("option 'serialization_dir': " + Shown(parent) +
                      " does not exist; create it first (the delegate makes only the last "
                      "directory of the path)");
}

// An option of a fixed set of values: its value by name (the table's order is the error's).
template <typename E>
E ParseEnum(const std::string& key, const std::string& value,
            const std::vector<std::pair<const char*, E>>& names) {
  std::vector<std::string> allowed;
  for (const auto& [name, e] : names) {
    if (value == name) return e;
    allowed.push_back(name);
  }
  OneOf(key, value, allowed);  // throws, naming them
  return names.front().second;
}

template <typename E>
const char* EnumName(E e, const std::vector<std::pair<const char*, E>>& names) {
  for (const auto& [name, v] : names)
    if (v == e) return name;
  return "?";
}

const std::vector<std::pair<const char*, Precision>> kPrecisions = {
    {"fp32", Precision::kFp32}, {"fp16", Precision::kFp16}, {"auto", Precision::kAuto}};
const std::vector<std::pair<const char*, Partitioning>> kPartitionings = {
    {"all", Partitioning::kAll}, {"cost", Partitioning::kCost}, {"none", Partitioning::kNone}};
const std::vector<std::pair<const char*, ZeroCopy>> kZeroCopies = {
    {"auto", ZeroCopy::kAuto}, {"on", ZeroCopy::kOn}, {"off", ZeroCopy::kOff}};

// Option `fuse`: "all", "none", or pass names (fusion/pass.h) separated by commas, kept in the
// table's order.
std::vector<std::string> ParseFuse(const std::string& value) {
  const std::vector<std::string>& names = FusionPassNames();
  if (value == "all") return names;
  if (value == "none") return {};
  std::vector<std::string> asked;
  size_t at = 0;
  for (;;) {
    const size_t comma = value.find(',', at);
    std::string name = value.substr(at, comma == std::string::npos ? comma : comma - at);
    name.erase(0, name.find_first_not_of(' '));
    name.erase(name.find_last_not_of(' ') + 1);
    if (std::find(names.begin(), names.end(), name) == names.end())
      throw OptionError("invalid value '" + Shown(value) +
                        "' for option 'fuse'; expected all, none or a comma-separated list of " +
                        Join(names));
    asked.push_back(name);
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  std::vector<std::string> out;
  for (const std::string& n : names)
    if (std::find(asked.begin(), asked.end(), n) != asked.end()) out.push_back(n);
  return out;
}

}  // namespace

const std::vector<std::string>& OptionKeys() {
  static const std::vector<std::string> keys = {"device",
                                                "precision",
                                                "max_delegated_partitions",
                                                "profiling",
                                                "partitioning",
                                                "conv_algorithm",
                                                "gemm_splits",
                                                "fuse_add",
                                                "fuse",
                                                "serialization_dir",
                                                "model_token",
                                                "zero_copy",
                                                "max_alloc_bytes",
                                                "capture_tensors",
                                                "runtime",
                                                "cpu_warmup"};
  return keys;
}

Options ParseOptions(const std::vector<std::pair<std::string, std::string>>& kv) {
  Options o;
  if (const std::string env = GetEnv("CLGPU_PARTITIONING").value_or(""); !env.empty()) {
    o.partitioning = ParseEnum("CLGPU_PARTITIONING", env, kPartitionings);
  }
  if (const std::string env = GetEnv("CLGPU_CPU_WARMUP").value_or(""); !env.empty())
    o.cpu_warmup = ParseBool("CLGPU_CPU_WARMUP", env);
  if (const std::string env = GetEnv("CLGPU_AUTO_FP16").value_or(""); !env.empty())
    o.auto_fp16_anywhere = ParseBool("CLGPU_AUTO_FP16", env);
  for (const auto& [key, value] : kv) {
    // C reads a string up to its first NUL: a value with one would be cut there, so a model
    // token "..\0x" became ".." (a directory outside serialization_dir).
    if (key.find('\0') != std::string::npos || value.find('\0') != std::string::npos)
      throw OptionError("option '" + Shown(key.substr(0, key.find('\0'))) +
                        "' holds a NUL character; option names and values are plain text");
    if (key == "device") {
      if (value.empty()) throw OptionError("option 'device' must not be empty");
      o.device = value;
    } else if (key == "precision") {
      o.precision = ParseEnum(key, value, kPrecisions);
    } else if (key == "max_delegated_partitions") {
      o.max_delegated_partitions = ParseNonNegativeInt(key, value);
    } else if (key == "profiling") {
      o.profiling = ParseBool(key, value);
    } else if (key == "partitioning") {
      o.partitioning = ParseEnum(key, value, kPartitionings);
    } else if (key == "conv_algorithm") {
      std::vector<std::string> allowed = {"auto"};
      for (const std::string& name : ConvAlgorithmNames()) allowed.push_back(name);
      OneOf(key, value, allowed);
      o.conv_algorithm = value;
    } else if (key == "serialization_dir") {
      CheckSerializationDir(value);
      o.serialization_dir = value;
    } else if (key == "model_token") {
      if (value.find('/') != std::string::npos || value == ".." || value == ".")
        throw OptionError("option 'model_token' must be a plain name: no '/', not '.' or '..'");
      o.model_token = value;
    } else if (key == "zero_copy") {
      o.zero_copy = ParseEnum(key, value, kZeroCopies);
    } else if (key == "max_alloc_bytes") {
      char* end = nullptr;
      errno = 0;
      const unsigned long long x = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || *end || errno || value[0] == '-')
        throw OptionError("invalid value '" + Shown(value) +
                          "' for option 'max_alloc_bytes'; expected a byte count");
      o.max_alloc_bytes = x;
    } else if (key == "capture_tensors") {
      o.capture_tensors = ParseBool(key, value);
    } else if (key == "cpu_warmup") {
      o.cpu_warmup = ParseBool(key, value);
    } else if (key == "fuse_add") {
      o.fuse = ParseBool(key, value) ? FusionPassNames() : std::vector<std::string>{};
    } else if (key == "fuse") {
      o.fuse = ParseFuse(value);
    } else if (key == "gemm_splits") {
      o.gemm_splits = ParseNonNegativeInt(key, value);
    } else if (key == "runtime") {
      o.runtime = value;
    } else {
      throw OptionError("unknown option '" + Shown(key) +
                        "'; valid options: " + Join(OptionKeys()));
    }
  }
  return o;
}

std::string DescribeOptions(const Options& o) {
  return "device=" + o.device + ", precision=" + EnumName(o.precision, kPrecisions) +
         ", max_delegated_partitions=" + std::to_string(o.max_delegated_partitions) +
         ", profiling=" + (o.profiling ? "true" : "false") +
         ", partitioning=" + EnumName(o.partitioning, kPartitionings) +
         ", conv_algorithm=" + o.conv_algorithm +
         ", zero_copy=" + EnumName(o.zero_copy, kZeroCopies) +
         ", fuse=" + (o.fuse.empty() ? std::string("none") : Join(o.fuse)) +
         ", cpu_warmup=" + (o.cpu_warmup ? "true" : "false");
}

}  // namespace clgpu
