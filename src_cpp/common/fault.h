// Test-only fault injection (option fail_at): where the delegate fails on purpose, so the
// tests can show what a user sees when that step fails for real (docs/faults.md).
#pragma once

namespace clgpu {

enum class FaultPoint { kNone, kCreate, kPrepare, kInit, kBuild, kAlloc, kInvoke, kRead, kCache };

}  // namespace clgpu
