// The GDN backward chunk kernel on wgmma, every variant of one template (V1 .. V12, persistent wg6 / wg9p / wg9ps): the
// body of gdn_bwd_chunk_wg.cu (whose header describes the variants), included once by it inside its anonymous namespace.
#ifndef LINATTN_GDN_BWD_CHUNK_WG_BODY
#error "gdn_bwd_chunk_wg_kernel.cuh is the body of gdn_bwd_chunk_wg.cu: include it only there"
#endif

template <class T, int V, bool V2, bool V3, int V4 = 0, bool kPer = false, class Maps = NoMaps>
__global__ void __launch_bounds__(kNT, 1)
    gdn_bwd_chunk_wg_kernel(GdnBwdParams p, GdnBwdWs w, const __grid_constant__ Maps maps) {
  static_assert(!V3 || V2, "wg3 extends wg2");
  static_assert(V4 == 0 || V3, "wg4 / wg5 extend wg3");
  static_assert(!kPer || V4 == 1 || V4 == 8 || V4 == 9, "wg6 / wg9p are wg4, wg9ps wg9, in persistent CTAs");
  // wg7 (V4 == 3): wg4 with each head's tiles in two cp.async groups (split load, see the header)
  // wg8d (V4 == 5): wg7 with each M element's decay computed once per head (under the first M product)
  // for both halves (V4 == 4, wg8, was removed)
  // wg9 / wg9d (V4 == 6 / 7): wg7 / wg8d with the row scalars split over 8 warps per head (one global round
  // trip each), heads 0 and 1 both at head 0's start (head 1's start loads nothing); wg9p (V4 == 8, kPer):
  // wg6 with the same row scalars, an item's heads 0 and 1 at the item's start; wg9ps (V4 == 9, kPer): wg9's split
  // loads in persistent CTAs (the next item's Ai / dV^ at the last head's second barrier, the rest at its third,
  // q / k after the epilogue), the row scalars as wg9p's, the last finish where wg7 has it
  static_assert(V4 != 4, "wg8 (V4 = 4) was removed in session 12");
  static_assert((V4 != 8 && V4 != 9) || kPer, "wg9p / wg9ps are persistent");
  // wg11 (V4 == 10): wg9d with the finishing passes' operands (M halves' decays and row / column scales, xn's and R K^'s
  // k words, <S, dS'>'s tiles) loaded ahead of their wgmma wait and Y.v's v pairs ahead of the head's first barrier.
  // wg12 (V4 == 11, Maps = ChunkMaps): wg11 with a full chunk's tiles by TMA (gdn_bwd_chunk_wg_tma.cuh; thread 0 issues,
  // every thread waits on the group's mbarrier after the barrier it waited on cp.async before), and the last finish
  // (warp 0) under the staged dq / dk stores, which warps 1-15 take over.
  constexpr bool kTma = V4 == 11;
  static_assert(!kTma || (V == 128 && std::is_same_v<Maps, ChunkMaps>), "wg12: V = 128 with its tensor maps");
  constexpr bool kW11 = V4 == 10 || kTma;
  constexpr bool kW8 = V4 == 5 || V4 == 7 || kW11, kD9 = V4 >= 6, kSplit = V4 == 3 || kW8 || V4 == 6 || V4 == 9;
  // wg9 / wg9d: the last head's finish (warp 0) after the epilogue's stores instead of before its first barrier
  constexpr bool kLateFin = kSplit && kD9 && !kPer;
  static_assert(!kSplit || !kPer || V4 == 9, "wg7 / wg8d / wg9 / wg9d are not persistent");
  using Sm = WgSmem<V>;
  constexpr int CV = V / kWN, NTV = CV / 8, NTK = 4, NTB = 2;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  Sm& s = *reinterpret_cast<Sm*>(smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u));
  const GdnFwdParams& f = p.f;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  // wg6: the CTA's items blockIdx.x, + gridDim.x, ... (find_item); slot 0 holds the first, whose
  // loads go out here as every later item's do: head 0's tiles, then q / k (two groups).
  WgPer& pr = *reinterpret_cast<WgPer*>(reinterpret_cast<WgRows*>(&s + 1) + 1);
  // wg7: partial set b (0: WgSmem's, 1: WgRed's; head jj writes set jj & 1, the epilogue set G & 1)
  WgRed& rd2 = *reinterpret_cast<WgRed*>(&pr + 1);
  auto red_of = [&](int b) -> float(*)[kBT][kWN] { return kSplit && b ? rd2.red : s.red; };
  if constexpr (kPer) {
    if (tid == 0) pr.nx[0] = find_item(p, w, blockIdx.x, gridDim.x);
    __syncthreads();
    const WgItem first = pr.nx[0];
    if (first.len <= 0) return;
    if constexpr (kSplit) {  // wg9ps: the three groups a later item finds in flight (Ai / dV^, the rest, q / k)
      const int j0 = first.h * (f.HV / f.H);
      load_head_part<T, V, 0>(s, p, w, first.r, first.t0, first.len, j0, tid);
      cp_async_commit();
      load_head_part<T, V, 1>(s, p, w, first.r, first.t0, first.len, j0, tid);
      cp_async_commit();
    } else {
      load_head_wg<T, V, V2, V3>(s, p, w, first.r, first.t0, first.len, first.h * (f.HV / f.H), tid);
      cp_async_commit();
    }
    load_item_qk<T, V, V2>(s, f, w, first.t0, first.len, first.h, tid);
    cp_async_commit();
  }
  for (int item = 0;; ++item) {
    // wg6: this item (slot item & 1, by value: thread 32 rewrites the other slot at the next item's
    // start, while a thread still in this item's tail may read nx) and the next one (nx, by thread 32,
    // read after the first barrier)
    WgItem it{};
    WgItem* const nx = &pr.nx[(item + 1) & 1];
    if constexpr (kPer) {
      it = pr.nx[item & 1];
      // (wg9ps: under head 0's Y instead, so head 0's first barrier does not wait for its index loads; read
      // first after head 0's second barrier)
      if (!kSplit && tid == 32) *nx = find_item(p, w, it.i + gridDim.x, gridDim.x);
    }
    const int64_t r = kPer ? it.r : int64_t(blockIdx.x);
    const int h = kPer ? it.h : int(blockIdx.y), G = f.HV / f.H;
    int64_t n = 0, c = 0;  // (wg6: the item came resolved from find_item)
    if constexpr (!kPer) {
      if (w.chunk_indices) {
        n = w.chunk_indices[2 * r];
        c = w.chunk_indices[2 * r + 1];
        if (n < 0) return;  // sentinel row: touch nothing
      } else {
        n = r / w.nts;
        c = r % w.nts;
      }
    }
    int64_t bos = 0, eos = 0;
    if constexpr (!kPer) seq_bounds(f, n, bos, eos);
    // wg3 (launched only when T_total < 2^31): t0 known to be a sign-extended 32-bit value, so its
    // high word is one shift away instead of a register live through the head loop (spilled)
    const int64_t t0 = kPer ? int64_t(int32_t(it.t0)) : V3 ? int64_t(int32_t(bos + c * kBT)) : bos + c * kBT;
    const int len = kPer ? it.len : static_cast<int>(min(int64_t(kBT), eos - t0));
    if (len <= 0) return;
    // wg12: TMA for a full chunk with d_o in the io type (CTA-uniform; from an opaque copy of len at each use, so no
    // flag lives through the head loop); its two mbarriers in WgPer's bytes
    auto use_tma = [&]() -> bool {
      if constexpr (kTma) {
        int l;
        asm volatile("mov.b32 %0, %1;" : "=r"(l) : "r"(len));
        return l == kBT && w.do_direct;
      } else {
        return false;
      }
    };
    [[maybe_unused]] uint64_t* const bars = reinterpret_cast<uint64_t*>(&pr);
    // warpgroup wn, row group wm (wg2: wn broadcast from lane 0, so the compiler keeps the
    // descriptor arithmetic that depends on it in uniform registers)
    const int wm = warp & 3, wn = V2 ? __shfl_sync(0xffffffffu, warp >> 2, 0) : warp >> 2, r0 = 16 * wm + g;
    const int ck = wn * 32, cv = wn * CV, cb = wn * 16;
    // wg2: per-thread swizzled fragment offsets (frag_base) of the K-, V- and BT-column tiles
    const uint32_t fbk = frag_base<kBT>(ck, wm, g, tq), fbv = frag_base<kBT>(cv, wm, g, tq),
                   fbb = frag_base<kBT>(cb, wm, g, tq);
    WgRows& rs = *reinterpret_cast<WgRows*>(&s + 1);  // wg2 only
    // wg7: warp 0's finish of head jf from partial set jf & 1 (as wg4's, with the set's pointers)
    auto finish_wg7 = [&](int jf) {
      const int b = jf & 1;
      const WgRedView v{red_of(b), b ? rd2.redc : s.redc, b ? rd2.wred : s.wred, s.rq, s.rk};
      finish_rows_core<kBT, kNW>(
          v, rs.gam[b], rs.beta[b], [&](int i, int64_t) { return RowDraws{rs.gate[b][i], rs.dA[b][i], rs.bdraw[b][i]}; },
          p, w, r, t0, len, h * G + jf, lane);
    };

    // wg7: this thread's v pairs of head j's Y.v row dot (rows r0, r0 + 8; 0 past len)
    auto load_vraw = [&](uint32_t(&vraw)[2][NTV], int j) {
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        int rv = r0 + 8 * hf;
        asm volatile("mov.b32 %0, %1;" : "=r"(rv) : "r"(rv));
        const T* vrow = static_cast<const T*>(f.v) + ((t0 + rv) * f.HV + j) * int64_t(V);
#pragma unroll
        for (int nt = 0; nt < NTV; ++nt)
          vraw[hf][nt] = rv < len ? *reinterpret_cast<const uint32_t*>(vrow + cv + nt * 8 + 2 * tq) : 0u;
      }
    };
    if constexpr (kSplit && !kPer) {  // wg7: head 0's Ai / dV^ first (its own group), then q / k and the rest
      // wg9: the row scalars of heads 0 (threads 0-255) and 1 (256-511, G > 1) in roles of 64 threads
      // (row_scalar_load), their loads issued ahead of the 152 KB of tiles, stored after them
      [[maybe_unused]] RowRaw raw{};
      [[maybe_unused]] const int jh0 = tid >> 8, role0 = (tid >> 6) & 3;
      if constexpr (kD9)
        if (jh0 < G) raw = row_scalar_load(p, w, t0, len, h * G + jh0, role0, tid & 63);
      if (use_tma()) {  // wg12: thread 0 issues both groups' tiles; the L2 prefetches and the row norms as before
        if constexpr (kTma)
          if (tid == 0) tma_head0(s, maps, bars, int(r), f.HV, w.c.T_cap, int(t0), h, h * G);
        prefetch_head_l2<V>(f, w, t0, len, h * G, tid);
        cp_async_commit();
        load_scalars_async<kBT>(s.rq, w.c.rq + h * w.c.T_cap + t0, len, tid);
        load_scalars_async<kBT>(s.rk, w.c.rk + h * w.c.T_cap + t0, len, tid - kBT);
        cp_async_commit();
      } else {
        load_head_part<T, V, 0>(s, p, w, r, t0, len, h * G, tid);
        cp_async_commit();
        load_item_qk<T, V, V2>(s, f, w, t0, len, h, tid);
        load_head_part<T, V, 1>(s, p, w, r, t0, len, h * G, tid);
        cp_async_commit();
      }
      if constexpr (kD9)
        if (jh0 < G) row_scalar_store(rs, p, len, jh0 & 1, role0, tid & 63, raw);
    } else if constexpr (!kPer) {  // wg6: issued before the loop (first item) or by the previous item
      load_item_qk<T, V, V2>(s, f, w, t0, len, h, tid);
      load_head_wg<T, V, V2, V3>(s, p, w, r, t0, len, h * G, tid);
      cp_async_commit();
    }

    float dqA[NTK][4] = {}, dkA[NTK][4] = {};
    for (int jj = 0; jj < G; ++jj) {
      const int j = h * G + jj;
      // this head's row scalars (wg2: buffer jj & 1, by warps 2-3, which do not run warp 0's
      // finish of the previous head, plus the finish's gate / beta draws)
      float* const gam = V2 ? rs.gam[jj & 1] : s.gam;
      float* const beta = V2 ? rs.beta[jj & 1] : s.beta;
      if (!V2 && tid < kBT) {
        const bool valid = tid < len;
        s.gam[tid] = valid ? w.c.gam[j * w.c.T_cap + t0 + tid] : 0.f;
        s.beta[tid] = valid ? gdn_beta(f, t0 + tid, j) : 0.f;
      }
      if constexpr (kD9) {
        // wg9: heads 0 and 1 were done before the loop (buffer 1 is read first at head 1's start, so that start
        // loads nothing). A head jj >= 2 (G > 2) loads its own at its start (threads 0-255), into the buffer
        // whose last reader, the finish of head jj - 2, ran before head jj - 1's second barrier (as in V2).
        // wg9p: an item's heads 0 and 1 at its start (no raw-register split: its tiles went out under the previous
        // item); the previous item's last finish (warp 0) read its buffer before the epilogue's barriers.
        // wg9ps: only the first item here; a later item's come from the previous item's end (below)
        if (kPer && jj == 0 && (!kSplit || item == 0)) {
          const int jh = tid >> 8, role = (tid >> 6) & 3, i = tid & 63;
          if (jh < G) row_scalar_store(rs, p, len, jh, role, i, row_scalar_load(p, w, t0, len, h * G + jh, role, i));
        }
        if (jj >= 2 && tid < kNT / 2) {
          const int role = tid >> 6, i = tid & 63;
          row_scalar_store(rs, p, len, jj & 1, role, i, row_scalar_load(p, w, t0, len, j, role, i));
        }
      } else if (V2 && tid >= kBT && tid < 2 * kBT) {
        const int i = tid - kBT, b = jj & 1;
        const bool valid = i < len;
        gam[i] = valid ? w.c.gam[j * w.c.T_cap + t0 + i] : 0.f;
        beta[i] = valid ? gdn_beta(f, t0 + i, j) : 0.f;
        const RowDraws rd = valid ? row_draws(p, t0 + i, j) : RowDraws{0.f, 0.f, 0.f};
        rs.gate[b][i] = rd.gate;
        rs.dA[b][i] = rd.dA;
        rs.bdraw[b][i] = rd.beta;
      }
      // wg11: this head's v pairs of the Y.v row dot (below) go out before the head's first barrier
      [[maybe_unused]] uint32_t vraw[2][NTV];
      if constexpr (kW11) load_vraw(vraw, j);
      if constexpr (kPer && kSplit) {  // wg9ps: head 0 needs Ai / dV^ of three groups, a later head of two
        if (jj == 0) cp_async_wait<2>();
        else cp_async_wait<1>();
      } else if constexpr (kPer) {  // wg6: head 0 leaves the item's q / k (its last group) in flight, under Y
        if (jj == 0) cp_async_wait<1>();
        else cp_async_wait<0>();
      } else if constexpr (kSplit) {  // wg7: the head's Ai / dV^ only; the rest lands under Y
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
      fence_view_async_shared();  // cp.async data -> the async proxy (wgmma)
      __syncthreads();
      if (use_tma()) mbar_wait(&bars[0], jj & 1);  // wg12: the head's Ai / dV^ (the barrier above ordered the init)

      const float gl = gam[len - 1];
      float eg[2], egl[2], bv[2], neg_beg[2];
#pragma unroll
      for (int hf = 0; hf < 2; ++hf) {
        const int rr = r0 + 8 * hf;
        const bool valid = rr < len;
        eg[hf] = valid ? exp2f(gam[rr]) : 0.f;
        egl[hf] = valid ? exp2f(gl - gam[rr]) : 0.f;
        bv[hf] = beta[rr];
        neg_beg[hf] = -bv[hf] * eg[hf];
      }
      // Row dots, flushed to s.red[q]: 0 Y.v, 1 q.dq_inter, 2 k.dk_inter, 3 rowsum(M), 4 k.(R K^),
      // 5 k.xn (q, k raw; the row scales are applied in finish_rows).

      if constexpr (V4 != 2) {  // Y = Ai^T dV^ (own buffer: no wait for the other warpgroups' reads of dV^); Y.v
        float Y[NTV][4] = {};
        // wg7: this thread's v pairs of the Y.v row dot are loaded while Y is on the tensor pipe
        // (same values, same operations after it: ld_pair of the same 32-bit words)
        if constexpr (kSplit) {
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTV]>(Y));
          wgmma_fence();
          wg_issue_v<V2, T, CV, kBT, true, true, kBT>(Y, s.ai, s.dvh, cv);
          wgmma_commit();
          if constexpr (!kW11) load_vraw(vraw, j);
          // the previous head's finish (warp 0), under Y and the other warps' Y.v: its partial set is
          // not the one this head writes, its row scalars not the buffer this head's start wrote
          if (jj > 0 && warp == 0) finish_wg7(jj - 1);
          if constexpr (kPer) {  // wg9ps: the next item (see the item's start)
            if (jj == 0 && tid == 32) *nx = find_item(p, w, it.i + gridDim.x, gridDim.x);
          }
          wgmma_wait<0>();
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTV]>(Y));
        } else {
          wg_tile_v<V2, T, CV, kBT, true, true, kBT>(Y, s.ai, s.dvh, cv);
        }
#pragma unroll
        for (int hf = 0; hf < 2; ++hf)
#pragma unroll
          for (int nt = 0; nt < NTV; ++nt)
            st_pair(V2 ? reinterpret_cast<T*>(s.y + frag_off(fbv, hf, nt))
                       : sw_at<T, kBT>(s.y, r0 + 8 * hf, cv + nt * 8 + 2 * tq),
                    Y[nt][2 * hf], Y[nt][2 * hf + 1]);
        float yv[2] = {};
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const int rr = r0 + 8 * hf;
          if (rr >= len) continue;
          // wg3: the row from an opaque copy of rr, so the row pointers are not hoisted out of the
          // head loop into spilled registers (their reloads sat in front of these loads)
          int rv = rr;
          if constexpr (V3) asm volatile("mov.b32 %0, %1;" : "=r"(rv) : "r"(rr));
          const T* vrow = static_cast<const T*>(f.v) + ((t0 + rv) * f.HV + j) * int64_t(V);
#pragma unroll
          for (int nt = 0; nt < NTV; ++nt) {
            const float2 vv = kSplit ? ld_pair(reinterpret_cast<const T*>(&vraw[hf][nt]))
                                     : ld_pair(vrow + cv + nt * 8 + 2 * tq);
            yv[hf] += Y[nt][2 * hf] * vv.x + Y[nt][2 * hf + 1] * vv.y;
          }
        }
        flush_rowdot<kBT>(red_of(jj & 1), 0, yv, r0, wn, tq);
      }
      if constexpr (kSplit) {
        // wg7: the head's second barrier moves here (before dq_inter / dk_inter, which read the
        // second group; xn after them needs only Y visible, which it is): second group landed and
        // visible to wgmma, Y visible to every warpgroup. Ai / dV^ are dead from here on (only Y
        // read them): the next head's go out now, a third of a head earlier than wg4's tiles.
        cp_async_wait<0>();
        fence_view_async_shared();
        __syncthreads();
        if (use_tma()) mbar_wait(&bars[1], jj & 1);  // wg12: S / dS' / V^ / dO (head 0: q / k too)
        if (jj + 1 < G && use_tma()) {  // wg12: the next head's L2 prefetches (everyone; its Ai / dV^ below)
          int ot;  // opaque, as load_head_part's tid (else the row pointers' high words are hoisted and spilled)
          asm volatile("mov.b32 %0, %1;" : "=r"(ot) : "r"(tid));
          prefetch_head_l2<V>(f, w, t0, len, j + 1, ot);
        } else if (jj + 1 < G) {
          load_head_part<T, V, 0>(s, p, w, r, t0, len, j + 1, tid);
        } else if constexpr (kPer) {  // wg9ps: the next item's head 0 (nx was set before the first barrier)
          if (nx->len > 0) load_head_part<T, V, 0>(s, p, w, nx->r, nx->t0, nx->len, nx->h * G, tid);
        }
        cp_async_commit();
      }
      if constexpr (kPer && !kSplit) {  // wg6: the item's q / k, read from the row dots of the pair below on
        if (jj == 0) {
          cp_async_wait<0>();
          fence_view_async_shared();
          __syncthreads();
        }
      }
      // wg5: the Y block below as a lambda, run when Y lands (Y issued with dq_inter / dk_inter)
      auto y_finish = [&](float (&Y)[NTV][4]) {
#pragma unroll
        for (int hf = 0; hf < 2; ++hf)
#pragma unroll
          for (int nt = 0; nt < NTV; ++nt)
            st_pair(V2 ? reinterpret_cast<T*>(s.y + frag_off(fbv, hf, nt))
                       : sw_at<T, kBT>(s.y, r0 + 8 * hf, cv + nt * 8 + 2 * tq),
                    Y[nt][2 * hf], Y[nt][2 * hf + 1]);
        float yv[2] = {};
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
          const int rr = r0 + 8 * hf;
          if (rr >= len) continue;
          // wg3: the row from an opaque copy of rr, so the row pointers are not hoisted out of the
          // head loop into spilled registers (their reloads sat in front of these loads)
          int rv = rr;
          if constexpr (V3) asm volatile("mov.b32 %0, %1;" : "=r"(rv) : "r"(rr));
          const T* vrow = static_cast<const T*>(f.v) + ((t0 + rv) * f.HV + j) * int64_t(V);
#pragma unroll
          for (int nt = 0; nt < NTV; ++nt) {
            const float2 vv = ld_pair(vrow + cv + nt * 8 + 2 * tq);
            yv[hf] += Y[nt][2 * hf] * vv.x + Y[nt][2 * hf + 1] * vv.y;
          }
        }
        flush_rowdot<kBT>(s.red, 0, yv, r0, wn, tq);
      };
      // wg4: dq_inter = scale e^gam (dO S^T), dk_inter = e^(gL - gam) (V^ dS'^T) finished as the
      // else branch below does (same operations, same order)
      // wg11: the k fragment words of xn's / R K^'s row dots, loaded ahead of the product's wait
      [[maybe_unused]] uint32_t kw[2][NTK];
      auto inter_q = [&](float (&t)[NTK][4]) {
        const float sc[2] = {f.scale * eg[0], f.scale * eg[1]};
        scale_rows(t, sc);
        float pq1[2] = {};
        rowdot_v<V2, T, NTK>(pq1, t, s.q, r0, ck, tq, fbk);
        flush_rowdot<kBT>(red_of(jj & 1), 1, pq1, r0, wn, tq);
        const float one[2] = {1.f, 1.f};
        add_scaled(dqA, t, one);
      };
      auto inter_k = [&](float (&t)[NTK][4]) {
        scale_rows(t, egl);
        float pk1[2] = {};
        rowdot_v<V2, T, NTK>(pk1, t, s.k, r0, ck, tq, fbk);
        flush_rowdot<kBT>(red_of(jj & 1), 2, pk1, r0, wn, tq);
        const float one[2] = {1.f, 1.f};
        add_scaled(dkA, t, one);
      };
      if constexpr (V4 > 0) {  // wg4: dq_inter and dk_inter issued back to back, each finished as it lands
        float Y[NTV][4] = {}, tq_[NTK][4] = {}, tk_[NTK][4] = {};  // Y: wg5 only
        wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(tq_));
        wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(tk_));
        if constexpr (V4 == 2) wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTV]>(Y));
        wgmma_fence();
        if constexpr (V4 == 2) {  // wg5: Y first, finished (its Y.v row dot's loads) under the two products
          wg_issue_v<V2, T, CV, kBT, true, true, kBT>(Y, s.ai, s.dvh, cv);
          wgmma_commit();
        }
        wg_issue_v<V2, T, 32, V, false, false, kK>(tq_, s.dO, s.S, ck);
        wgmma_commit();
        wg_issue_v<V2, T, 32, V, false, false, kK>(tk_, s.vh, s.dS, ck);
        wgmma_commit();
        if constexpr (kTma) {  // wg12: the next head's Ai / dV^ (dead since the barrier above; the pair reads neither),
          // issued by thread 0 behind its warpgroup's products instead of ahead of them
          if (jj + 1 < G && tid == 0 && use_tma())
            tma_head_part<0>(s, maps, bars, int(r), f.HV, w.c.T_cap, int(t0), h, j + 1);
        }
        if constexpr (V4 == 2) {
          wgmma_wait<2>();
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTV]>(Y));
          y_finish(Y);
        }
        wgmma_wait<1>();
        wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(tq_));
        inter_q(tq_);
        wgmma_wait<0>();
        wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(tk_));
        inter_k(tk_);
      } else {
        {  // dq_inter = scale e^gam (dO S^T)
          float t[NTK][4] = {};
          wg_tile_v<V2, T, 32, V, false, false, kK>(t, s.dO, s.S, ck);
          const float sc[2] = {f.scale * eg[0], f.scale * eg[1]};
          scale_rows(t, sc);
          float pq1[2] = {};
          rowdot_v<V2, T, NTK>(pq1, t, s.q, r0, ck, tq, fbk);
          flush_rowdot<kBT>(s.red, 1, pq1, r0, wn, tq);
          const float one[2] = {1.f, 1.f};
          add_scaled(dqA, t, one);
        }
        {  // dk_inter = e^(gL - gam) (V^ dS'^T)
          float t[NTK][4] = {};
          wg_tile_v<V2, T, 32, V, false, false, kK>(t, s.vh, s.dS, ck);
          scale_rows(t, egl);
          float pk1[2] = {};
          rowdot_v<V2, T, NTK>(pk1, t, s.k, r0, ck, tq, fbk);
          flush_rowdot<kBT>(s.red, 2, pk1, r0, wn, tq);
          const float one[2] = {1.f, 1.f};
          add_scaled(dkA, t, one);
        }
      }
      // <S, dS'> (same layout: 16-byte pieces in address order; block partials in a fixed order)
      auto s_dot_ds = [&] {
        float acc = 0.f;
        if constexpr (kW11) {  // the pieces two passes ahead of their sums (same sums, same order)
          constexpr int NP = kK * V / 8 / kNT;
          static_assert(NP >= 2 && NP * kNT == kK * V / 8, "s_dot_ds: whole passes");
          const uint4* const pS = reinterpret_cast<const uint4*>(s.S) + tid;
          const uint4* const pD = reinterpret_cast<const uint4*>(s.dS) + tid;
          uint4 a[2] = {pS[0], pS[kNT]}, b[2] = {pD[0], pD[kNT]};
#pragma unroll
          for (int u = 0; u < NP; ++u) {
            const uint4 x = a[u & 1], y = b[u & 1];
            if (u + 2 < NP) {
              a[u & 1] = pS[(u + 2) * kNT];
              b[u & 1] = pD[(u + 2) * kNT];
            }
            acc += dot8<T, true>(x, y);
          }
        } else {
          for (int idx = tid; idx < kK * V / 8; idx += kNT)
            acc += dot8<T>(reinterpret_cast<const uint4*>(s.S)[idx], reinterpret_cast<const uint4*>(s.dS)[idx]);
        }
        acc = warp_sum(acc);
        if (lane == 0) (kSplit && (jj & 1) ? rd2.wred : s.wred)[warp] = acc;
      };
      if constexpr (!V3) s_dot_ds();
      if constexpr (!kSplit) {  // (wg7: above, before dq_inter / dk_inter)
        fence_view_async_shared();
        __syncthreads();  // Y visible to every warpgroup
      }

      {  // xn = Y S^T: dk^ -= beta e^gam xn
        float t[NTK][4] = {};
        if constexpr (V3) {  // wg3: <S, dS'> runs while the product is in flight (both only read S)
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(t));
          wgmma_fence();
          wg_issue_v<V2, T, 32, V, false, false, kK>(t, s.y, s.S, ck);
          wgmma_commit();
          s_dot_ds();
          if constexpr (kW11) frag_words<NTK>(kw, s.k, fbk);
          wgmma_wait<0>();
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(t));
        } else {
          wg_tile_v<V2, T, 32, V, false, false, kK>(t, s.y, s.S, ck);
        }
        float pk[2] = {};
        if constexpr (kW11) rowdot_words<T, NTK>(pk, t, kw);
        else rowdot_v<V2, T, NTK>(pk, t, s.k, r0, ck, tq, fbk);
        flush_rowdot<kBT>(red_of(jj & 1), 5, pk, r0, wn, tq);
        add_scaled(dkA, t, neg_beg);
      }
      {  // Pd = scale M o D o (dO V^^T), R = -M- o D o (Y V^^T), staged with their row / column scales;
         // M = Pd o (Q^ K^^T) + diag(beta) R o (K^ K^^T) in two halves (16 accumulators live, not 32)
        float rowM[2] = {}, colM[NTB][2] = {};
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          float pl[NTB][4] = {}, xk[NTB][4] = {};  // half 0: dO V^^T, Q K^T; half 1: Y V^^T, K K^T
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTB]>(pl));
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTB]>(xk));
          wgmma_fence();
          wg_issue_v<V2, T, 16, V, false, false, kBT>(pl, half == 0 ? s.dO : s.y, s.vh, cb);
          if constexpr (kSplit) {
            // wg7: the two products in two groups: X (into pl) and the staged Pd / R stores run while
            // Q K^T / K K^T is on the tensor pipe, then M's row / column sums (same operations and
            // order as below: X, the stores, then m = X (xk ..) into rowM / colM)
            wgmma_commit();
            wg_issue_v<V2, T, 16, kK, false, false, kBT>(xk, half == 0 ? s.q : s.k, s.k, cb);
            wgmma_commit();
            if constexpr (kW8) {  // half 0, under the first product: the values the element loop computes,
              // kept in this thread's own staging slots of R / beta R (4 bytes each, written by no other
              // thread and read by no one between this head's first barrier and its R stores), where
              // both halves' element loops read them (see decay_frag for what spilled)
              if (half == 0) {
                float dd[2][NTB][2];
                decay_frag<NTB>(dd, gam, r0, cb + 2 * tq, len);
#pragma unroll
                for (int hf = 0; hf < 2; ++hf)
#pragma unroll
                  for (int nt = 0; nt < NTB; ++nt) {
                    *reinterpret_cast<float*>(s.rm + frag_off(fbb, hf, nt)) = dd[hf][nt][0];
                    *reinterpret_cast<float*>(s.rb + frag_off(fbb, hf, nt)) = dd[hf][nt][1];
                  }
              }
            }
            // wg11: what the element loops below read of shared memory (the decays in the staging slots, the row /
            // column scales), loaded ahead of the wait (the same values: only when the loads go out moves)
            [[maybe_unused]] float pd[2][NTB][2], prk[NTB][2], prq[2], pbk[2];
            if constexpr (kW11) {
#pragma unroll
              for (int hf = 0; hf < 2; ++hf) {
                const int i = r0 + 8 * hf;
                prq[hf] = s.rq[i];
                pbk[hf] = bv[hf] * s.rk[i];
#pragma unroll
                for (int nt = 0; nt < NTB; ++nt)
#pragma unroll
                  for (int e = 0; e < 2; ++e)
                    pd[hf][nt][e] = *reinterpret_cast<const float*>((e ? s.rb : s.rm) + frag_off(fbb, hf, nt));
              }
#pragma unroll
              for (int nt = 0; nt < NTB; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e) prk[nt][e] = s.rk[cb + nt * 8 + 2 * tq + e];
            }
            wgmma_wait<1>();
            wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTB]>(pl));
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
              const int i = r0 + 8 * hf;
              const float gi = gam[i], rqi = kW11 ? prq[hf] : s.rq[i], brk = kW11 ? pbk[hf] : bv[hf] * s.rk[i];
#pragma unroll
              for (int nt = 0; nt < NTB; ++nt) {
                const int c0 = cb + nt * 8 + 2 * tq;
                float(&X)[4] = pl[nt];  // X of row i, column c0 + e at 2 hf + e
                float rkc[2];
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                  const int jc = c0 + e;
                  float d;
                  if constexpr (kW11) d = pd[hf][nt][e];
                  else if constexpr (kW8) d = *reinterpret_cast<const float*>((e ? s.rb : s.rm) + frag_off(fbb, hf, nt));
                  else d = (i < len && jc <= i) ? exp2f(gi - gam[jc]) : 0.f;
                  rkc[e] = kW11 ? prk[nt][e] : s.rk[jc];
                  X[2 * hf + e] = half == 0 ? f.scale * d * X[2 * hf + e] : jc < i ? -d * X[2 * hf + e] : 0.f;
                }
                const uint32_t o = frag_off(fbb, hf, nt);
                const float x0 = X[2 * hf], x1 = X[2 * hf + 1];
                st_pair(reinterpret_cast<T*>((half == 0 ? s.pk : s.rm) + o), x0 * rkc[0], x1 * rkc[1]);
                if (half == 0) st_pair(reinterpret_cast<T*>(s.pq + o), rqi * x0, rqi * x1);
                else st_pair(reinterpret_cast<T*>(s.rb + o), brk * x0, brk * x1);
              }
            }
            wgmma_wait<0>();
            wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTB]>(xk));
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
              const int i = r0 + 8 * hf;
              const float rqi = kW11 ? prq[hf] : s.rq[i], brk = kW11 ? pbk[hf] : bv[hf] * s.rk[i];
#pragma unroll
              for (int nt = 0; nt < NTB; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                  const float X = pl[nt][2 * hf + e], rkc = kW11 ? prk[nt][e] : s.rk[cb + nt * 8 + 2 * tq + e];
                  const float m = half == 0 ? X * (xk[nt][2 * hf + e] * rqi * rkc) : brk * X * (xk[nt][2 * hf + e] * rkc);
                  rowM[hf] += m;
                  colM[nt][e] += m;
                }
            }
            continue;
          }
          wg_issue_v<V2, T, 16, kK, false, false, kBT>(xk, half == 0 ? s.q : s.k, s.k, cb);
          wg_sync(pl);
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTB]>(xk));
#pragma unroll
          for (int hf = 0; hf < 2; ++hf) {
            const int i = r0 + 8 * hf;
            const float gi = gam[i], rqi = s.rq[i], brk = bv[hf] * s.rk[i];
#pragma unroll
            for (int nt = 0; nt < NTB; ++nt) {
              const int c0 = cb + nt * 8 + 2 * tq;
              float X[2], rkc[2];
#pragma unroll
              for (int e = 0; e < 2; ++e) {
                const int jc = c0 + e;
                const float d = (i < len && jc <= i) ? exp2f(gi - gam[jc]) : 0.f;
                rkc[e] = s.rk[jc];
                float m;
                if (half == 0) {
                  X[e] = f.scale * d * pl[nt][2 * hf + e];
                  m = X[e] * (xk[nt][2 * hf + e] * rqi * rkc[e]);
                } else {
                  X[e] = jc < i ? -d * pl[nt][2 * hf + e] : 0.f;
                  m = brk * X[e] * (xk[nt][2 * hf + e] * rkc[e]);
                }
                rowM[hf] += m;
                colM[nt][e] += m;
              }
              const uint32_t o = V2 ? frag_off(fbb, hf, nt) : sw_off<kBT>(i, c0);
              if (half == 0) {
                st_pair(reinterpret_cast<T*>(s.pk + o), X[0] * rkc[0], X[1] * rkc[1]);
                st_pair(reinterpret_cast<T*>(s.pq + o), rqi * X[0], rqi * X[1]);
              } else {
                st_pair(reinterpret_cast<T*>(s.rm + o), X[0] * rkc[0], X[1] * rkc[1]);
                st_pair(reinterpret_cast<T*>(s.rb + o), brk * X[0], brk * X[1]);
              }
            }
          }
        }
        flush_rowdot<kBT>(red_of(jj & 1), 3, rowM, r0, wn, tq);
#pragma unroll
        for (int nt = 0; nt < NTB; ++nt)
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float cs = colM[nt][e];  // sum over the 16 rows of this warp: lanes with the same tq
            cs += __shfl_xor_sync(0xffffffffu, cs, 4);
            cs += __shfl_xor_sync(0xffffffffu, cs, 8);
            cs += __shfl_xor_sync(0xffffffffu, cs, 16);
            if (g == 0) (kSplit && (jj & 1) ? rd2.redc : s.redc)[cb + nt * 8 + 2 * tq + e][wm] = cs;
          }
      }
      fence_view_async_shared();
      __syncthreads();  // staged intra matrices visible; S, dS', V^, Y, dO, Ai of head j are dead
      if (kSplit && jj + 1 < G && use_tma()) {  // wg12: the rest of the next head's tiles: below, behind R K^ / Pd K^
      } else if (kSplit && jj + 1 < G) {  // wg7: the rest of the next head's tiles (Ai / dV^ went out above)
        load_head_part<T, V, 1>(s, p, w, r, t0, len, j + 1, tid);
      } else if (jj + 1 < G) {
        load_head_wg<T, V, V2, V3>(s, p, w, r, t0, len, j + 1, tid);
      } else if constexpr (kPer && kSplit) {  // wg9ps: the rest of the next item's head 0
        if (nx->len > 0) load_head_part<T, V, 1>(s, p, w, nx->r, nx->t0, nx->len, nx->h * G, tid);
      } else if constexpr (kPer) {  // wg6: the next item's first head, like a next head
        if (nx->len > 0) load_head_wg<T, V, V2, V3>(s, p, w, nx->r, nx->t0, nx->len, nx->h * G, tid);
      }
      cp_async_commit();

      if constexpr (V4 == 0) {  // dq^ += Pd K^ (accumulated in place: the product adds onto the running group sum)
        wg_tile_v<V2, T, 32, kBT, false, true, kBT>(dqA, s.pk, s.k, ck);
      }
      {  // dk^ += beta (R K^)
        float t[NTK][4] = {};
        if constexpr (V4 > 0) {  // wg4: R K^ first, then dq^ += Pd K^ left in flight until dk^'s wait below
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(t));
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(dqA));
          wgmma_fence();
          wg_issue_v<V2, T, 32, kBT, false, true, kBT>(t, s.rm, s.k, ck);
          wgmma_commit();
          wg_issue_v<V2, T, 32, kBT, false, true, kBT>(dqA, s.pk, s.k, ck);
          wgmma_commit();
          if constexpr (kTma) {  // wg12: the rest of the next head's tiles (S, dS', V^, dO: dead since the barrier above,
            // read by neither product in flight), by thread 0 behind its warpgroup's products
            if (jj + 1 < G && tid == 0 && use_tma())
              tma_head_part<1>(s, maps, bars, int(r), f.HV, w.c.T_cap, int(t0), h, j + 1);
          }
          if constexpr (kW11) frag_words<NTK>(kw, s.k, fbk);
          wgmma_wait<1>();
          wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(t));
        } else {
          wg_tile_v<V2, T, 32, kBT, false, true, kBT>(t, s.rm, s.k, ck);
        }
        float pk[2] = {};
        if constexpr (kW11) rowdot_words<T, NTK>(pk, t, kw);
        else rowdot_v<V2, T, NTK>(pk, t, s.k, r0, ck, tq, fbk);
        flush_rowdot<kBT>(red_of(jj & 1), 4, pk, r0, wn, tq);
        add_scaled(dkA, t, bv);
      }
      {  // dk^ += Pd^T Q^ + (beta R)^T K^ (in place)
        wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(dkA));
        wgmma_fence();
        wg_issue_v<V2, T, 32, kBT, true, true, kBT>(dkA, s.pq, s.q, ck);
        wg_issue_v<V2, T, 32, kBT, true, true, kBT>(dkA, s.rb, s.k, ck);
        wg_sync(dkA);
        if constexpr (V4 > 0) wgmma_fence_operands(reinterpret_cast<float(&)[4 * NTK]>(dqA));  // Pd K^ landed too
      }
      // (wg7: only after the last head, for its finish: a next head's first barrier orders this
      // head's partials before that finish, and nothing else this head reads is written before it)
      // (wg9: not even then: its finish runs after the epilogue's first barrier, and the epilogue's row dots
      // write the other partial set and read only q / k)
      if (!kSplit || (jj + 1 == G && !kLateFin)) __syncthreads();
      if constexpr (kSplit) {
        // the last head's finish; the epilogue below writes the other partial set (no barrier). wg9: at the
        // kernel's end instead (the epilogue writes none of what it reads: partial set G - 1 & 1, redc / wred of
        // that set, rq / rk, the row-scalar buffers), so the other warps' epilogue no longer waits for it
        if (!kLateFin && jj + 1 == G && warp == 0) finish_wg7(jj);
      } else if constexpr (V2) {
        // no barrier after it: the next head's start writes the other row-scalar buffer, and its
        // first barrier (which warp 0 reaches after this) precedes every write of s.red / redc / wred
        const int b = jj & 1;
        if (warp == 0)
          finish_rows_core<kBT, kNW>(
              s, gam, beta, [&](int i, int64_t) { return RowDraws{rs.gate[b][i], rs.dA[b][i], rs.bdraw[b][i]}; }, p, w,
              r, t0, len, j, lane);
        if (jj + 1 == G) __syncthreads();  // the L2-norm epilogue below reuses s.red
      } else {
        if (warp == 0) finish_rows<kBT, kNW>(s, p, w, r, t0, len, j, lane);
        __syncthreads();
      }
    }
    if constexpr (!kPer) cp_async_wait<0>();  // wg6: the next item's tiles stay in flight

    // L2-norm backward of the group sums: dx = r dy - r^3 (dy . x) x (x raw, y = r x); store.
    float pq2[2] = {}, pk2[2] = {};
    rowdot_v<V2, T, NTK>(pq2, dqA, s.q, r0, ck, tq, fbk);
    rowdot_v<V2, T, NTK>(pk2, dkA, s.k, r0, ck, tq, fbk);
    flush_rowdot<kBT>(red_of(G & 1), 0, pq2, r0, wn, tq);
    flush_rowdot<kBT>(red_of(G & 1), 1, pk2, r0, wn, tq);
    // wg3: a gradient in the io type with a 16-byte aligned base is written in place over the q / k
    // tile elements this thread just read (each element has exactly one owner), then stored as
    // 16-byte row pieces (the per-element stores use 8 of every 32 bytes they move). wg6 stages them
    // in the intra tiles (dead since the last head) instead, so the next q / k can land meanwhile
    // (pk + pq, rm + rb; written at each use: named pointer variables here changed the default's SASS).
    constexpr ElemType kIo = std::is_same_v<T, __nv_bfloat16> ? ElemType::kBF16 : ElemType::kF16;
    const bool dq_staged = V3 && p.dq.p && p.dq.t == kIo && (reinterpret_cast<uintptr_t>(p.dq.p) & 15) == 0;
    const bool dk_staged = V3 && p.dk.p && p.dk.t == kIo && (reinterpret_cast<uintptr_t>(p.dk.p) & 15) == 0;
    __syncthreads();
#pragma unroll
    for (int hf = 0; hf < 2; ++hf) {
      const int rr = r0 + 8 * hf;
      if (rr >= len) continue;
      float fq = 1.f, cq = 0.f, fk = 1.f, cpk = 0.f;
      if (f.l2norm) {
        float sq, sk;
        if constexpr (kSplit) {  // wg7: the partial set the last head did not write
          const float(*const er)[kBT][kWN] = red_of(G & 1);
          sq = ((er[0][rr][0] + er[0][rr][1]) + er[0][rr][2]) + er[0][rr][3];
          sk = ((er[1][rr][0] + er[1][rr][1]) + er[1][rr][2]) + er[1][rr][3];
        } else {
          sq = ((s.red[0][rr][0] + s.red[0][rr][1]) + s.red[0][rr][2]) + s.red[0][rr][3];
          sk = ((s.red[1][rr][0] + s.red[1][rr][1]) + s.red[1][rr][2]) + s.red[1][rr][3];
        }
        fq = s.rq[rr];
        fk = s.rk[rr];
        cq = fq * fq * fq * sq;
        cpk = fk * fk * fk * sk;
      }
      const int64_t base = ((t0 + rr) * f.H + h) * int64_t(kK);
#pragma unroll
      for (int nt = 0; nt < NTK; ++nt) {
        const int col = ck + nt * 8 + 2 * tq;
        const uint32_t o = V2 ? frag_off(fbk, hf, nt) : sw_off<kBT>(rr, col);
        const float2 qv = ld_pair(reinterpret_cast<const T*>(s.q + o)), kv = ld_pair(reinterpret_cast<const T*>(s.k + o));
        const float dq0 = fq * dqA[nt][2 * hf] - cq * qv.x, dq1 = fq * dqA[nt][2 * hf + 1] - cq * qv.y;
        const float dk0 = fk * dkA[nt][2 * hf] - cpk * kv.x, dk1 = fk * dkA[nt][2 * hf + 1] - cpk * kv.y;
        if (dq_staged) {
          st_pair(reinterpret_cast<T*>((kPer ? s.pk : s.q) + o), dq0, dq1);
        } else if (p.dq.p) {
          store_out(p.dq.p, p.dq.t, base + col, dq0);
          store_out(p.dq.p, p.dq.t, base + col + 1, dq1);
        }
        if (dk_staged) {
          st_pair(reinterpret_cast<T*>((kPer ? s.rm : s.k) + o), dk0, dk1);
        } else if (p.dk.p) {
          store_out(p.dk.p, p.dk.t, base + col, dk0);
          store_out(p.dk.p, p.dk.t, base + col + 1, dk1);
        }
      }
    }
    // wg9ps: the next item's row scalars (heads 0 and 1), loaded ahead of its q / k, stored after the staged
    // stores below (the buffers' last reader, this item's last finish, ran before the epilogue's first barrier)
    [[maybe_unused]] RowRaw nraw{};
    [[maybe_unused]] const bool nrow = kPer && kSplit && nx->len > 0 && (tid >> 8) < G;
    if constexpr (kPer) {  // wg6: no return (the loop below skips unstaged gradients)
      __syncthreads();  // q / k / rq / rk / red read, the staged tiles written: the next item's q / k
      if constexpr (kSplit)
        if (nrow) nraw = row_scalar_load(p, w, nx->t0, nx->len, nx->h * G + (tid >> 8), (tid >> 6) & 3, tid & 63);
      if (nx->len > 0) load_item_qk<T, V, V2>(s, f, w, nx->t0, nx->len, nx->h, tid);
      cp_async_commit();
    } else if constexpr (V3) {
      if (!dq_staged && !dk_staged) {
        if (kLateFin && warp == 0) finish_wg7(G - 1);  // wg9: the last head's finish (see above)
        return;
      }
      __syncthreads();
    }
    if constexpr (kTma) {
      // wg12: warps 1-15 store every piece (same pieces, same values) while warp 0 runs the last finish below
      constexpr int P = kK / 8, PER = kBT * P, NS = kNT - 32;
      if (warp != 0) {
#pragma unroll
        for (int u = 0; u < (2 * PER + NS - 1) / NS; ++u) {
          const int idx = tid - 32 + u * NS, which = idx / PER, row = (idx % PER) / P, ch = idx % P;
          if (idx >= 2 * PER) break;
          if (row >= len || !(which == 0 ? dq_staged : dk_staged)) continue;
          const uint4 val = *reinterpret_cast<const uint4*>((which == 0 ? s.q : s.k) + sw_off<kBT>(row, ch * 8));
          T* dst = static_cast<T*>(which == 0 ? p.dq.p : p.dk.p) + ((t0 + row) * f.H + h) * int64_t(kK) + ch * 8;
          *reinterpret_cast<uint4*>(dst) = val;
        }
      }
    } else if constexpr (V3) {
      // rows in address order: 16 pieces of 8 columns per row, 16 threads per 256-byte row
      constexpr int P = kK / 8, PER = kBT * P;
#pragma unroll
      for (int u = 0; u < 2 * PER / kNT; ++u) {
        const int idx = tid + u * kNT, which = idx / PER, row = (idx % PER) / P, ch = idx % P;
        if (row >= len || !(which == 0 ? dq_staged : dk_staged)) continue;
        const uint4 val = *reinterpret_cast<const uint4*>(
            (which == 0 ? (kPer ? s.pk : s.q) : (kPer ? s.rm : s.k)) + sw_off<kBT>(row, ch * 8));
        T* dst = static_cast<T*>(which == 0 ? p.dq.p : p.dk.p) + ((t0 + row) * f.H + h) * int64_t(kK) + ch * 8;
        *reinterpret_cast<uint4*>(dst) = val;
      }
    }
    if constexpr (kLateFin) {
      if (warp == 0) finish_wg7(G - 1);  // wg9: the last head's finish (see above)
    }
    if constexpr (kPer && kSplit) {  // wg9ps: read after the next item's first barrier
      if (nrow) row_scalar_store(rs, p, nx->len, tid >> 8, (tid >> 6) & 3, tid & 63, nraw);
    }
    if constexpr (!kPer) break;
    if (nx->len <= 0) break;  // wg6: no item left for this CTA
  }
}
