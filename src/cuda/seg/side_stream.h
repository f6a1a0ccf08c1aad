// A second stream for tier 3's concurrent passes (tier3.cc, LINATTN_CUDA_TIER3_FIRST): the first
// segment's forward runs on it beside the state pass on the caller's stream. One non-blocking
// stream of the device's highest priority and two events per (host thread, device), created on
// first use (with the thread's capture mode relaxed for the creation, so a first call inside a
// stream capture works) and destroyed when the thread exits. Fork and join are event record /
// wait pairs: in a stream capture the side stream joins the capture and rejoins the caller's
// stream at the join, so the captured graph holds the two branches; eagerly nothing synchronizes
// the host. No CUDA headers here (streams as void*).
#pragma once

namespace linattn::cuda::seg {

// Returns the side stream of the current device after making it wait for the work queued so far
// on `main` (the caller's stream).
void* side_fork(void* main);

// Makes `main` wait for the work queued so far on the current device's side stream.
void side_join(void* main);

}  // namespace linattn::cuda::seg
