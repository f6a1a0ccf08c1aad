// Count-then-carve workspace: slice bookkeeping and the caller-buffer checks.
#include "meta/workspace.h"

#include <cstdint>
#include <limits>
#include <sstream>

#include "core/check.h"

namespace linattn::meta {

namespace {
constexpr size_t kAlign = kWorkspaceAlignment;
size_t align_up(size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
}  // namespace

Workspace::Workspace(void* base, size_t capacity_bytes)
    : base_(static_cast<std::byte*>(base)), carving_(true), capacity_(capacity_bytes) {}

size_t Workspace::checked_bytes(int64_t count, size_t elem) {
  LINATTN_ASSERT(count >= 0, "workspace slice of negative count ", count);
  LINATTN_ASSERT(static_cast<uint64_t>(count) <= (std::numeric_limits<size_t>::max() / 2) / elem,
                 "workspace slice of ", count, " elements overflows");
  return static_cast<size_t>(count) * elem;
}

void* Workspace::take_bytes(const char* name, size_t bytes) {
  const size_t offset = align_up(end_);
  LINATTN_ASSERT(bytes <= std::numeric_limits<size_t>::max() / 2 - offset,
                 "workspace overflows at slice '", name, "'");
  end_ = offset + bytes;
  slices_.push_back({name, offset, bytes});
  if (!carving_) return nullptr;
  // carve_workspace checked the capacity with the same layout; reaching this means the layout
  // function is not deterministic.
  LINATTN_ASSERT(end_ <= capacity_, "workspace slice '", name, "' ends at ", end_,
                 " past the capacity ", capacity_, " (layout function not deterministic?)");
  return bytes == 0 && base_ == nullptr ? nullptr : base_ + offset;
}

size_t Workspace::bytes() const { return align_up(end_); }

std::string Workspace::str() const {
  std::ostringstream os;
  for (const auto& s : slices_) os << s.name << "@" << s.offset << "+" << s.bytes << " ";
  os << "(" << bytes() << " B)";
  return os.str();
}

void check_workspace(const void* base, size_t capacity_bytes, size_t required, const char* arg) {
  if (required == 0) return;
  LINATTN_CHECK_CODE(base != nullptr, ErrorCode::kInvalidArgument,
                     FailureCategory::kAddressOrLifetime, arg, ": expected a buffer of >= ",
                     required, " bytes, got null");
  LINATTN_CHECK_CODE(reinterpret_cast<uintptr_t>(base) % kAlign == 0, ErrorCode::kInvalidArgument,
                     FailureCategory::kAddressOrLifetime, arg, ": expected a base aligned to ",
                     kAlign, " bytes, got address ", base);
  LINATTN_CHECK_CODE(capacity_bytes >= required, ErrorCode::kInvalidArgument,
                     FailureCategory::kAddressOrLifetime, arg, "_bytes: expected >= ", required,
                     ", got ", capacity_bytes);
}

}  // namespace linattn::meta
