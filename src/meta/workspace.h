// Count-then-carve workspaces (GRAPH_CONTRACT.md section 4). An op writes ONE layout function
// that asks a Workspace for each named sub-buffer in order:
//     void layout(const Desc& d, meta::Workspace& ws, Bufs* b) {
//       b->w = ws.take<float>("w", d.T * d.HV * d.K);  ...
//     }
// Run on a counting Workspace it sizes (take() returns nullptr; bytes() is workspace_bytes(desc));
// run on a carving Workspace over the caller's buffer it slices. Since both come from the same
// calls they cannot disagree. Every slice starts at a multiple of kWorkspaceAlignment (256 B)
// from the base; the base must be 256-B aligned. Nested layouts compose by passing the same
// Workspace on. Carving never allocates device memory and never touches the buffer's contents.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "linattn/meta.h"

namespace linattn::meta {

struct WorkspaceSlice {
  const char* name;  // static string given to take()
  size_t offset;     // bytes from the base, multiple of kWorkspaceAlignment
  size_t bytes;
};

class Workspace {
 public:
  Workspace() = default;  // counting
  // Carving over [base, base + capacity_bytes). Use carve_workspace() to get the size checks.
  Workspace(void* base, size_t capacity_bytes);

  bool carving() const { return carving_; }
  // A sub-buffer of `count` elements of T (nullptr while counting).
  template <class T>
  T* take(const char* name, int64_t count) {
    return static_cast<T*>(take_bytes(name, checked_bytes(count, sizeof(T))));
  }
  void* take_bytes(const char* name, size_t bytes);

  size_t bytes() const;  // end of the last slice, rounded up to the alignment
  const std::vector<WorkspaceSlice>& slices() const { return slices_; }
  std::string str() const;  // "w@0+4096 u@4096+512 (4608 B)"

 private:
  static size_t checked_bytes(int64_t count, size_t elem);
  std::byte* base_ = nullptr;
  bool carving_ = false;
  size_t capacity_ = 0;
  size_t end_ = 0;
  std::vector<WorkspaceSlice> slices_;
};

// Bytes the layout needs: run it on a counting Workspace.
template <class LayoutFn>
size_t workspace_bytes_of(LayoutFn&& layout) {
  Workspace ws;
  layout(ws);
  return ws.bytes();
}

// Checks a caller's workspace for a layout of `required` bytes: base aligned to 256 B and
// non-null when required > 0, capacity >= required. InvalidArgument [address-or-lifetime]
// naming `arg`, the expected and the actual value.
void check_workspace(const void* base, size_t capacity_bytes, size_t required, const char* arg);

// Sizes the layout, checks the caller's buffer against that size, then slices it with the same
// layout function. Returns the carving Workspace (its slices name every sub-buffer).
template <class LayoutFn>
Workspace carve_workspace(void* base, size_t capacity_bytes, LayoutFn&& layout,
                          const char* arg = "workspace") {
  check_workspace(base, capacity_bytes, workspace_bytes_of(layout), arg);
  Workspace ws(base, capacity_bytes);
  layout(ws);
  return ws;
}

}  // namespace linattn::meta
