#include "comm/comm.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "comm/comm-mpi.h"
#include "comm/comm-wait.h"
#include "errors.h"

namespace engine {

struct Comm::Impl {
  MPI_Comm comm = MPI_COMM_NULL;  // MPI_COMM_NULL: the size-1 group without MPI
  int32_t rank = 0, size = 1;
  bool owned = false;             // created by split: freed with the last reference
  ~Impl() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned && comm != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm);
  }
};

namespace {

std::mutex g_mu;
CommInfo g_info;
bool g_initialized = false;
MPI_Comm g_world = MPI_COMM_NULL;  // MPI_COMM_WORLD, or the group of comm_join_group
bool g_isolated = false;

void check(int rc, const char* what) { comm_check(rc, what); }

// Our addon is dlopen'ed by Node with RTLD_LOCAL, so libmpi's symbols are invisible to the plugins Open MPI
// dlopens itself ("undefined symbol: ompi_..." at MPI_Init). Re-opening the already loaded libmpi with
// RTLD_GLOBAL makes them visible; the library is found from one of its own functions, whatever its soname.
void promote_libmpi_symbols() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&MPI_Init_thread), &info) != 0 && info.dli_fname != nullptr) {
    dlopen(info.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  }
}

// MPI counts are int: split large transfers into chunks.
template <typename Fn>
void chunked(size_t bytes, Fn fn) {
  constexpr size_t kMax = static_cast<size_t>(INT_MAX) / 2;
  for (size_t off = 0; off < bytes; off += kMax) fn(off, static_cast<int>(std::min(kMax, bytes - off)));
}

}  // namespace

void comm_check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  comm_abort(3, std::string(what) + " failed: " + std::string(text, static_cast<size_t>(len)));
}

MPI_Comm CommAccess::handle(const Comm& c) { return c.impl_->comm; }

Comm::Comm() : impl_(std::make_shared<Impl>()) {}
Comm::Comm(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
Comm::~Comm() = default;
Comm::Comm(const Comm&) = default;
Comm& Comm::operator=(const Comm&) = default;

int32_t Comm::rank() const { return impl_->rank; }
int32_t Comm::size() const { return impl_->size; }

Comm Comm::split(int32_t color, int32_t key) const {
  if (impl_->comm == MPI_COMM_NULL) return Comm();
  auto impl = std::make_shared<Impl>();
  check(MPI_Comm_split(impl_->comm, color, key, &impl->comm), "MPI_Comm_split");
  impl->owned = true;
  MPI_Comm_rank(impl->comm, &impl->rank);
  MPI_Comm_size(impl->comm, &impl->size);
  return Comm(impl);
}

// Every call below waits through wait_request (comm-wait.h): it spins like MPI's blocking calls, and the liveness
// watch sees the wait, so a peer that never comes cannot hold this rank forever.
void Comm::broadcast(void* data, size_t bytes, int32_t root) const {
  if (impl_->size == 1) return;
  chunked(bytes, [&](size_t off, int n) {
    MPI_Request request;
    check(MPI_Ibcast(static_cast<char*>(data) + off, n, MPI_BYTE, root, impl_->comm, &request), "MPI_Ibcast");
    wait_request(request, {"broadcast", impl_->comm});
  });
}

void Comm::broadcast_bytes(std::vector<uint8_t>& data, int32_t root) const {
  if (impl_->size == 1) return;
  uint64_t n = data.size();
  broadcast(&n, sizeof(n), root);
  data.resize(n);
  broadcast(data.data(), n, root);
}

void Comm::all_reduce_sum(float* data, size_t count) const {
  if (impl_->size == 1) return;
  chunked(count, [&](size_t off, int n) {
    MPI_Request request;
    check(MPI_Iallreduce(MPI_IN_PLACE, data + off, n, MPI_FLOAT, MPI_SUM, impl_->comm, &request), "MPI_Iallreduce");
    wait_request(request, {"all-reduce", impl_->comm});
  });
}

void Comm::all_gather(const float* send, size_t count, float* recv) const {
  if (impl_->size == 1) {
    std::copy(send, send + count, recv);
    return;
  }
  if (count > static_cast<size_t>(INT_MAX)) comm_abort(3, "all_gather of more than INT_MAX floats");
  MPI_Request request;
  check(MPI_Iallgather(send, static_cast<int>(count), MPI_FLOAT, recv, static_cast<int>(count), MPI_FLOAT, impl_->comm,
                       &request),
        "MPI_Iallgather");
  wait_request(request, {"all-gather", impl_->comm});
}

void Comm::gather(const float* send, size_t count, float* recv, int32_t root) const {
  if (impl_->size == 1) {
    std::copy(send, send + count, recv);
    return;
  }
  if (count > static_cast<size_t>(INT_MAX)) comm_abort(3, "gather of more than INT_MAX floats");
  MPI_Request request;
  check(MPI_Igather(send, static_cast<int>(count), MPI_FLOAT, recv, static_cast<int>(count), MPI_FLOAT, root,
                    impl_->comm, &request),
        "MPI_Igather");
  wait_request(request, {"gather", impl_->comm});
}

void Comm::send(const void* data, size_t bytes, int32_t dest, int32_t tag) const {
  chunked(bytes, [&](size_t off, int n) {
    MPI_Request request;
    check(MPI_Isend(static_cast<const char*>(data) + off, n, MPI_BYTE, dest, tag, impl_->comm, &request), "MPI_Isend");
    wait_request(request, {"send to", impl_->comm, dest});
  });
}

void Comm::recv(void* data, size_t bytes, int32_t source, int32_t tag) const {
  chunked(bytes, [&](size_t off, int n) {
    MPI_Request request;
    check(MPI_Irecv(static_cast<char*>(data) + off, n, MPI_BYTE, source, tag, impl_->comm, &request), "MPI_Irecv");
    wait_request(request, {"recv from", impl_->comm, source});
  });
}

struct PendingTransfer::Impl {
  std::vector<MPI_Request> requests;
  MPI_Comm comm = MPI_COMM_NULL;
  const char* op = "recv from";
  int32_t peer = -1;
  ~Impl() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    for (MPI_Request& r : requests) {
      if (r == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&r);
      MPI_Request_free(&r);
    }
  }
};

PendingTransfer::PendingTransfer() = default;
PendingTransfer::~PendingTransfer() = default;
PendingTransfer::PendingTransfer(PendingTransfer&&) noexcept = default;
PendingTransfer& PendingTransfer::operator=(PendingTransfer&&) noexcept = default;

bool PendingTransfer::pending() const { return impl_ && !impl_->requests.empty(); }

void PendingTransfer::wait() {
  if (!pending()) return;
  wait_all(impl_->requests, {impl_->op, impl_->comm, impl_->peer});
  impl_->requests.clear();
}

bool PendingTransfer::test() {
  if (!pending()) return true;
  int done = 0;
  check(MPI_Testall(static_cast<int>(impl_->requests.size()), impl_->requests.data(), &done, MPI_STATUSES_IGNORE),
        "MPI_Testall");
  if (done) impl_->requests.clear();
  return done != 0;
}

PendingTransfer Comm::post(void* data, size_t bytes, int32_t peer, int32_t tag, bool send) const {
  PendingTransfer p;
  p.impl_ = std::make_unique<PendingTransfer::Impl>();
  p.impl_->comm = impl_->comm;
  p.impl_->op = send ? "send to" : "recv from";
  p.impl_->peer = peer;
  chunked(bytes, [&](size_t off, int n) {
    MPI_Request request;
    char* at = static_cast<char*>(data) + off;
    if (send) check(MPI_Isend(at, n, MPI_BYTE, peer, tag, impl_->comm, &request), "MPI_Isend");
    else check(MPI_Irecv(at, n, MPI_BYTE, peer, tag, impl_->comm, &request), "MPI_Irecv");
    p.impl_->requests.push_back(request);
  });
  return p;
}

PendingTransfer Comm::post_recv(void* data, size_t bytes, int32_t source, int32_t tag) const {
  return post(data, bytes, source, tag, false);
}

PendingTransfer Comm::post_send(const void* data, size_t bytes, int32_t dest, int32_t tag) const {
  // MPI_Isend only reads the buffer.
  return post(const_cast<void*>(data), bytes, dest, tag, true);
}

void Comm::barrier() const {
  if (impl_->size == 1) return;
  MPI_Request request;
  check(MPI_Ibarrier(impl_->comm, &request), "MPI_Ibarrier");
  wait_request(request, {"barrier", impl_->comm});
}

CommInfo comm_init(bool use_mpi, bool thread_multiple) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_initialized) return g_info;
  g_initialized = true;
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  g_info.host = host;
  if (!use_mpi) return g_info;

  promote_libmpi_symbols();
  int provided = 0;
  const int wanted = thread_multiple ? MPI_THREAD_MULTIPLE : MPI_THREAD_SERIALIZED;
  int rc = MPI_Init_thread(nullptr, nullptr, wanted, &provided);
  if (rc != MPI_SUCCESS) {
    throw EngineError(ErrorCode::unsupported, "MPI_Init_thread failed (error " + std::to_string(rc) +
                                                  "); start the ranks with mpirun or srun --mpi=pmix");
  }
  if (provided < wanted) {
    throw EngineError(ErrorCode::unsupported, "the MPI library provides thread level " + std::to_string(provided) +
                                                  (thread_multiple ? ", orchestrator mode needs MPI_THREAD_MULTIPLE"
                                                                   : ", the executor needs MPI_THREAD_SERIALIZED"));
  }
  // Errors come back as codes (we abort the job on them) instead of MPI's default of killing the process silently.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  g_info.mpi = true;
  g_world = MPI_COMM_WORLD;
  MPI_Comm_rank(MPI_COMM_WORLD, &g_info.world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_info.world_size);
  g_info.job_rank = g_info.world_rank;
  g_info.job_size = g_info.world_size;
  MPI_Comm parent = MPI_COMM_NULL;
  MPI_Comm_get_parent(&parent);
  g_info.spawned = parent != MPI_COMM_NULL;
  g_isolated = g_info.spawned;
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_info.world_rank, MPI_INFO_NULL, &local);
  MPI_Comm_rank(local, &g_info.local_rank);
  MPI_Comm_size(local, &g_info.local_size);
  MPI_Comm_free(&local);
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(version, &len);
  g_info.library = std::string(version, static_cast<size_t>(len));
  while (!g_info.library.empty() && (g_info.library.back() == '\n' || g_info.library.back() == '\0')) g_info.library.pop_back();
  return g_info;
}

CommInfo comm_info() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_info;
}

Comm comm_world() {
  CommInfo info = comm_info();
  if (!info.mpi) return Comm();
  auto impl = std::make_shared<Comm::Impl>();
  impl->comm = comm_world_handle();
  impl->rank = info.world_rank;
  impl->size = info.world_size;
  return Comm(impl);
}

void comm_join_group(int32_t color) {
  const CommInfo info = comm_info();
  if (!info.mpi) throw EngineError(ErrorCode::unsupported, "comm_join_group needs MPI: start the ranks with mpirun or srun");
  MPI_Comm group = MPI_COMM_NULL;
  check(MPI_Comm_split(MPI_COMM_WORLD, color, info.job_rank, &group), "MPI_Comm_split");
  MPI_Comm_set_errhandler(group, MPI_ERRORS_RETURN);
  std::lock_guard<std::mutex> lock(g_mu);
  g_world = group;
  MPI_Comm_rank(group, &g_info.world_rank);
  MPI_Comm_size(group, &g_info.world_size);
  g_isolated = true;
}

std::vector<RankIdentity> comm_world_members() {
  const CommInfo info = comm_info();
  RankIdentity self{info.host, static_cast<int64_t>(getpid())};
  if (!info.mpi || info.world_size == 1) return {self};
  constexpr size_t kHost = 256;
  struct Wire {
    int64_t pid;
    char host[kHost];
  };
  Wire mine{};
  mine.pid = self.pid;
  std::snprintf(mine.host, kHost, "%s", self.host.c_str());
  std::vector<Wire> all(static_cast<size_t>(info.world_size));
  check(MPI_Allgather(&mine, sizeof(Wire), MPI_BYTE, all.data(), sizeof(Wire), MPI_BYTE, comm_world_handle()),
        "MPI_Allgather");
  std::vector<RankIdentity> out;
  for (const Wire& w : all) out.push_back({std::string(w.host), w.pid});
  return out;
}

bool comm_isolated() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_isolated;
}

MPI_Comm comm_world_handle() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_world;
}

void comm_finalize() {
  if (!comm_info().mpi) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  // MPI_Finalize waits for every process this one is connected to: a spawned rank first leaves its parent
  // (the orchestrator disconnects from the same intercommunicator), so the two jobs end independently.
  MPI_Comm parent = MPI_COMM_NULL;
  MPI_Comm_get_parent(&parent);
  if (parent != MPI_COMM_NULL) MPI_Comm_disconnect(&parent);
  MPI_Finalize();
}

void comm_abort(int32_t code, const std::string& reason) {
  CommInfo info = comm_info();
  std::fprintf(stderr, "[rank %d@%s] fatal: %s; aborting all ranks\n", info.world_rank, info.host.c_str(), reason.c_str());
  std::fflush(stderr);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  // MPI_Abort would take the whole job down, the orchestrator and the other models included.
  if (initialized && !finalized && !comm_isolated()) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace engine
