// CPU short causal conv (forward and backward) over ConvParams (meta/conv_desc.h).
// Work items are (row range x channel block); every output element is owned by one item, and
// dweight / dbias are reduced over a fixed number of row groups in a fixed order, so results do
// not depend on the thread count. Rows at or past cu_seqlens[N] (graph-mode padding) are never
// read or written. `num_threads` = 0 uses the library pool's size.
#pragma once
#include "meta/conv_desc.h"

namespace linattn::cpu {

// y (+ ht when p.ht). Reads cu_seqlens when it runs.
void conv_fwd(const meta::ConvParams& p, int num_threads);
// dx, dres, dweight, dbias, dh0 (each when non-null); p.partials must hold
// conv_bwd_partials_floats floats when dweight or dbias is requested.
void conv_bwd(const meta::ConvParams& p, int num_threads);

}  // namespace linattn::cpu
