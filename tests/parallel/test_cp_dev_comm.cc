// DeviceThreadCommunicator (label gpu): ranks as threads sharing GPU 0, each with its own
// non-blocking stream. all_gather delivers every rank's record in rank order for 1, 2, 4 and 8
// ranks over several calls of different sizes (0 bytes included); a rank that overwrites its
// send buffer right after the call never corrupts what the others received (the stream waits of
// step 3); a capturing stream is refused with Unsupported.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cp_cuda_util.h"
#include "linattn/error.h"
#include "parallel/device_thread_comm.h"

namespace linattn::test {
namespace {

// fn(rank, comm, stream): run_sim_ranks with a non-blocking stream per rank.
void run_sim_ranks_s(int world, const std::function<void(int, parallel::Communicator&, cudaStream_t)>& fn) {
  run_sim_ranks(world, [&](int r, parallel::Communicator& comm) {
    cudaStream_t s;
    cuda_ok(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    try {
      fn(r, comm, s);
      cuda_ok(cudaStreamSynchronize(s), "sync");
    } catch (...) {
      cudaStreamDestroy(s);
      throw;
    }
    cudaStreamDestroy(s);
  });
}

uint32_t word(int call, int rank, size_t i) { return 0x9E3779B9u * uint32_t(call + 1) ^ uint32_t(rank) << 20 ^ uint32_t(i); }

TEST(DeviceThreadComm, AllGatherInRankOrderOnOneGpu) {
  if (gpu_count() < 1) GTEST_FAIL() << "needs a GPU (run by scripts/gpu-final)";
  const std::vector<size_t> words_per_call = {1000, 0, 37, 65536, 3};
  for (int world : {1, 2, 4, 8}) {
    SCOPED_TRACE("world " + std::to_string(world));
    std::vector<std::vector<uint32_t>> got(static_cast<size_t>(world) * words_per_call.size());
    run_sim_ranks_s(world, [&](int r, parallel::Communicator& comm, cudaStream_t s) {
      EXPECT_EQ(comm.world_size(), world);
      EXPECT_EQ(comm.rank(), r);
      EXPECT_TRUE(comm.device_buffers());
      DevMem m;
      for (size_t c = 0; c < words_per_call.size(); ++c) {
        const size_t n = words_per_call[c];
        std::vector<uint32_t> mine(n);
        for (size_t i = 0; i < n; ++i) mine[i] = word(static_cast<int>(c), r, i);
        auto* send = static_cast<uint32_t*>(m.raw(n * 4));
        auto* recv = static_cast<uint32_t*>(m.raw(n * 4 * world));
        cuda_ok(cudaMemcpyAsync(send, mine.data(), n * 4, cudaMemcpyHostToDevice, s), "upload");
        cuda_ok(cudaStreamSynchronize(s), "sync");  // `mine` is pageable: the copy must finish first
        comm.all_gather(send, recv, n * 4, s);
        // Overwrite at once: the other ranks' copies of this record must already be done.
        cuda_ok(cudaMemsetAsync(send, 0xAB, n * 4, s), "memset");
        std::vector<uint32_t>& out = got[static_cast<size_t>(r) * words_per_call.size() + c];
        out.resize(n * world);
        cuda_ok(cudaMemcpyAsync(out.data(), recv, n * 4 * world, cudaMemcpyDeviceToHost, s), "download");
        cuda_ok(cudaStreamSynchronize(s), "sync");
      }
    });
    for (int r = 0; r < world; ++r)
      for (size_t c = 0; c < words_per_call.size(); ++c) {
        const std::vector<uint32_t>& out = got[static_cast<size_t>(r) * words_per_call.size() + c];
        const size_t n = words_per_call[c];
        for (int q = 0; q < world; ++q)
          for (size_t i = 0; i < n; ++i)
            ASSERT_EQ(out[q * n + i], word(static_cast<int>(c), q, i))
                << "rank " << r << " call " << c << ": record of rank " << q << " word " << i;
      }
  }
}

TEST(DeviceThreadComm, RefusesCapture) {
  if (gpu_count() < 1) GTEST_FAIL() << "needs a GPU (run by scripts/gpu-final)";
  run_sim_ranks_s(1, [&](int, parallel::Communicator& comm, cudaStream_t s) {
    DevMem m;
    void* buf = m.raw(64);
    void* out = m.raw(64);  // before the capture: cudaMalloc is not allowed inside it
    cuda_ok(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin capture");
    bool refused = false;
    try {
      comm.all_gather(buf, out, 64, s);
    } catch (const Error& e) {
      refused = e.code() == ErrorCode::kUnsupported &&
                std::string(e.what()).find("eager only") != std::string::npos;
    }
    cudaGraph_t g = nullptr;
    cudaStreamEndCapture(s, &g);
    if (g) cudaGraphDestroy(g);
    EXPECT_TRUE(refused) << "all_gather under capture must raise Unsupported";
  });
}

TEST(DeviceThreadComm, ValidatesRank) {
  auto group = std::make_shared<parallel::DeviceThreadGroup>(2);
  try {
    parallel::DeviceThreadCommunicator bad(group, 2);
    FAIL() << "rank 2 of 2 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank: expected in [0, 2), got 2"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace linattn::test
