// Bump allocator over a caller's workspace, used in two passes: with base == nullptr it only
// counts (off ends at the bytes needed), then the same sequence of take() calls over the real
// base carves it. Every buffer starts on an Align-byte boundary (relative to base).
#pragma once
#include <cstddef>

namespace linattn {

template <size_t Align>
struct WorkspaceCarver {
  static_assert(Align > 0 && (Align & (Align - 1)) == 0, "Align: a power of two");
  char* base = nullptr;
  size_t off = 0;
  template <class T>
  T* take(size_t count) {
    off = (off + Align - 1) & ~(Align - 1);
    T* p = base ? reinterpret_cast<T*>(base + off) : nullptr;
    off += count * sizeof(T);
    return p;
  }
};

}  // namespace linattn
