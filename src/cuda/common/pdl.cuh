// Device side of Programmatic Dependent Launch (launch_pdl in launch.h). Both are empty unless kPdl, so a
// kernel's kPdl = false instance compiles exactly as without them.
#pragma once

namespace linattn::cuda {

// Waits until every earlier grid on the stream has completed and its writes are visible (griddepcontrol.wait).
// A kernel launched with PDL must run this in every CTA before its first read of their outputs and its first
// write to a buffer they may read; a no-op when the launch had no programmatic dependency.
template <bool kPdl>
__device__ __forceinline__ void pdl_wait() {
  if constexpr (kPdl) asm volatile("griddepcontrol.wait;" ::: "memory");
}

// Lets the next PDL-launched grid start once every CTA of this one has run this or exited
// (griddepcontrol.launch_dependents); says nothing about this grid's writes (the dependent's pdl_wait does).
template <bool kPdl>
__device__ __forceinline__ void pdl_launch_dependents() {
  if constexpr (kPdl) asm volatile("griddepcontrol.launch_dependents;" :::);
}

}  // namespace linattn::cuda
