// NcclCommunicator (see nccl_comm.h). Without LINATTN_WITH_NCCL every entry point but the
// environment parsing raises Unsupported, so callers link the same symbols on every build.
#include "parallel/nccl_comm.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "core/check.h"

#if LINATTN_WITH_NCCL
#include <cuda_runtime.h>
#include <nccl.h>

#include "cuda/common/check.h"
#endif

namespace linattn::parallel {
namespace {

bool env_int(const char* name, int* out) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return false;
  *out = std::atoi(v);
  return true;
}

#if LINATTN_WITH_NCCL
std::string id_file() {
  if (const char* f = std::getenv("LINATTN_NCCL_ID_FILE")) return f;
  const char* port = std::getenv("MASTER_PORT");
  return std::string("/tmp/linattn-nccl-") + (port ? port : "0") + ".id";
}

void nccl_check(ncclResult_t r, const char* what) {
  LINATTN_CHECK_CODE(r == ncclSuccess, ErrorCode::kBackend, FailureCategory::kDistributed, what, ": ",
                     ncclGetErrorString(r));
}
#endif

}  // namespace

RankEnv rank_env_from_environment() {
  RankEnv e;
  const char* sets[][3] = {{"RANK", "WORLD_SIZE", "LOCAL_RANK"},
                           {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
                           {"PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"}};
  for (const auto& s : sets) {
    if (env_int(s[0], &e.rank) && env_int(s[1], &e.world)) {
      if (!env_int(s[2], &e.local_rank)) e.local_rank = e.rank;
      e.found = true;
      return e;
    }
  }
  return e;
}

#if LINATTN_WITH_NCCL

bool nccl_available() { return true; }

NcclUniqueId nccl_unique_id() {
  ncclUniqueId id;
  nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  NcclUniqueId out{};
  static_assert(sizeof(id) == sizeof(out));
  std::memcpy(out.data(), &id, sizeof(id));
  return out;
}

NcclCommunicator::NcclCommunicator(const NcclUniqueId& id, int rank, int world, int device)
    : rank_(rank), world_(world), device_(device) {
  LINATTN_CHECK(world >= 1 && rank >= 0 && rank < world, "rank: expected in [0, ", world, "), got ", rank);
  LINATTN_CUDA_CHECK(cudaSetDevice(device));
  ncclUniqueId nid;
  std::memcpy(&nid, id.data(), sizeof(nid));
  ncclComm_t c = nullptr;
  nccl_check(ncclCommInitRank(&c, world, nid, rank), "ncclCommInitRank");
  comm_ = c;
  const int info[2] = {rank, world};
  LINATTN_CUDA_CHECK(cudaMalloc(&rank_info_, sizeof(info)));
  LINATTN_CUDA_CHECK(cudaMemcpy(rank_info_, info, sizeof(info), cudaMemcpyHostToDevice));
  // NCCL connects the peers lazily at a communicator's first collective, which fails inside a
  // stream capture ("operation not permitted when stream is capturing", seen on 2 H200s): one
  // eager all-gather here (collective like the constructor) makes every later call capturable.
  int* warm = nullptr;
  cudaStream_t s = nullptr;
  LINATTN_CUDA_CHECK(cudaMalloc(&warm, sizeof(int) * static_cast<size_t>(world)));
  LINATTN_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const ncclResult_t r = ncclAllGather(rank_info_, warm, 1, ncclInt32, c, s);
  const cudaError_t e = cudaStreamSynchronize(s);
  cudaStreamDestroy(s);
  cudaFree(warm);
  nccl_check(r, "ncclAllGather (connection warm-up)");
  LINATTN_CUDA_CHECK(e);
}

NcclCommunicator::~NcclCommunicator() {
  if (rank_info_) cudaFree(rank_info_);
  if (comm_) ncclCommDestroy(static_cast<ncclComm_t>(comm_));
}

std::unique_ptr<NcclCommunicator> NcclCommunicator::from_env() {
  const RankEnv e = rank_env_from_environment();
  LINATTN_CHECK_CODE(e.found, ErrorCode::kInvalidArgument, FailureCategory::kDistributed,
                     "environment: expected RANK / WORLD_SIZE (torchrun) or OMPI_COMM_WORLD_* / PMI_* (MPI), got none");
  const std::string path = id_file();
  NcclUniqueId id{};
  if (e.rank == 0) {
    id = nccl_unique_id();
    const std::string tmp = path + ".tmp";
    std::ofstream(tmp, std::ios::binary).write(id.data(), static_cast<std::streamsize>(id.size()));
    std::rename(tmp.c_str(), path.c_str());  // atomic publish
  } else {
    for (int tries = 0;; ++tries) {
      std::ifstream f(path, std::ios::binary);
      if (f && f.read(id.data(), static_cast<std::streamsize>(id.size()))) break;
      LINATTN_CHECK_CODE(tries < 600, ErrorCode::kBackend, FailureCategory::kDistributed,
                         "NCCL id file: expected rank 0 to write ", path, " within 60 s, got nothing");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  return std::make_unique<NcclCommunicator>(id, e.rank, e.world, e.local_rank);
}

void NcclCommunicator::all_gather(const void* send, void* recv, size_t bytes, void* stream) {
  nccl_check(ncclAllGather(send, recv, bytes, ncclChar, static_cast<ncclComm_t>(comm_),
                           static_cast<cudaStream_t>(stream)),
             "ncclAllGather");
}

#else  // no NCCL in this build

bool nccl_available() { return false; }

NcclUniqueId nccl_unique_id() {
  LINATTN_UNSUPPORTED("NCCL: this build has no NCCL (configure with -DLINATTN_ENABLE_CUDA=ON and NCCL installed)");
}
NcclCommunicator::NcclCommunicator(const NcclUniqueId&, int, int, int) {
  LINATTN_UNSUPPORTED("NCCL: this build has no NCCL (configure with -DLINATTN_ENABLE_CUDA=ON and NCCL installed)");
}
NcclCommunicator::~NcclCommunicator() = default;
std::unique_ptr<NcclCommunicator> NcclCommunicator::from_env() {
  LINATTN_UNSUPPORTED("NCCL: this build has no NCCL (configure with -DLINATTN_ENABLE_CUDA=ON and NCCL installed)");
}
void NcclCommunicator::all_gather(const void*, void*, size_t, void*) {
  LINATTN_UNSUPPORTED("NCCL: this build has no NCCL");
}

#endif

}  // namespace linattn::parallel
