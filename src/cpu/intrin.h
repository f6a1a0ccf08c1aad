// <immintrin.h> with GCC 12's false -Wmaybe-uninitialized inside the AVX-512 intrinsics
// (their `__Y = __Y` idiom, fixed in GCC 13) silenced for the header's own lines only.
// Include this instead of <immintrin.h>, before any header that includes it.
#pragma once
#if defined(__AVX2__) || defined(__AVX512F__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif
