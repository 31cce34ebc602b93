#include "comm/comm-link.h"

#include <algorithm>
#include <climits>
#include <list>
#include <mutex>

#include "comm/comm-mpi.h"
#include "comm/comm.h"
#include "errors.h"

namespace engine {

namespace {

std::string mpi_error_text(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

struct PendingSend {
  MPI_Request request = MPI_REQUEST_NULL;
  std::vector<uint8_t> bytes;
};

}  // namespace

struct Link::Impl {
  MPI_Comm inter = MPI_COMM_NULL;
  mutable std::mutex mu;
  std::list<PendingSend> sends;  // a list: the buffers must not move while MPI holds them
  bool broken = false;           // an MPI call failed (the peer is gone): the link goes quiet

  explicit Impl(MPI_Comm c) : inter(c) { MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN); }

  void complete_sends() {
    for (auto it = sends.begin(); it != sends.end();) {
      int done = 0;
      if (MPI_Test(&it->request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
        broken = true;
        return;
      }
      it = done ? sends.erase(it) : std::next(it);
    }
  }
};

Link::Link() = default;
Link::Link(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Link::~Link() = default;
Link::Link(Link&&) noexcept = default;
Link& Link::operator=(Link&&) noexcept = default;

bool Link::connected() const { return impl_ != nullptr && impl_->inter != MPI_COMM_NULL; }

void Link::post(int32_t tag, std::vector<uint8_t> bytes) {
  if (!connected()) return;
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    throw EngineError(ErrorCode::invalid_argument,
                      "a link message of " + std::to_string(bytes.size()) + " bytes exceeds MPI's 2 GiB message limit");
  }
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->broken) return;
  impl_->sends.emplace_back();
  PendingSend& s = impl_->sends.back();
  s.bytes = std::move(bytes);
  if (MPI_Isend(s.bytes.data(), static_cast<int>(s.bytes.size()), MPI_BYTE, 0, tag, impl_->inter, &s.request) !=
      MPI_SUCCESS) {
    impl_->sends.pop_back();
    impl_->broken = true;
  }
}

bool Link::poll(int32_t& tag, std::vector<uint8_t>& bytes) {
  if (!connected()) return false;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (impl_->broken) return false;
  impl_->complete_sends();
  int flag = 0;
  MPI_Status status;
  if (MPI_Iprobe(0, MPI_ANY_TAG, impl_->inter, &flag, &status) != MPI_SUCCESS) {
    impl_->broken = true;
    return false;
  }
  if (!flag) return false;
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  bytes.resize(static_cast<size_t>(count));
  if (MPI_Recv(bytes.data(), count, MPI_BYTE, 0, status.MPI_TAG, impl_->inter, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
    impl_->broken = true;
    return false;
  }
  tag = status.MPI_TAG;
  return true;
}

size_t Link::pending() const {
  if (!connected()) return 0;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->broken) impl_->complete_sends();
  return impl_->broken ? 0 : impl_->sends.size();
}

void Link::disconnect() {
  if (!connected()) return;
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (!impl_->broken) {
    // Sends still in flight are part of the disconnect's completion; a broken peer is never waited for.
    for (auto& s : impl_->sends) MPI_Wait(&s.request, MPI_STATUS_IGNORE);
    impl_->sends.clear();
    MPI_Comm_disconnect(&impl_->inter);
  }
  impl_->inter = MPI_COMM_NULL;
}

Link link_spawn(const SpawnSpec& spec) {
  if (!comm_info().mpi) {
    throw EngineError(ErrorCode::unsupported, "spawning a worker group needs MPI: start the orchestrator under mpirun");
  }
  if (spec.processes < 1) {
    throw EngineError(ErrorCode::invalid_argument, "a worker group needs at least 1 process, got " + std::to_string(spec.processes));
  }
  std::vector<char*> argv;
  for (const std::string& a : spec.args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  MPI_Info info = MPI_INFO_NULL;
  MPI_Info_create(&info);
  if (!spec.host.empty()) MPI_Info_set(info, "host", spec.host.c_str());
  // Unbound, as the launcher's own job is (mpirun --bind-to none): Open MPI otherwise binds a small spawned job to
  // one core each, where a replica's executor threads, its Node thread and its link poller then share that core
  // (two CPU replicas served 0.63-0.70x what two unbound servers did on a 16-core machine).
  MPI_Info_set(info, "bind_to", "none");
  std::vector<int> errors(static_cast<size_t>(spec.processes), MPI_SUCCESS);
  MPI_Comm inter = MPI_COMM_NULL;
  MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN);
  const int rc = MPI_Comm_spawn(spec.command.c_str(), argv.data(), spec.processes, info, 0, MPI_COMM_SELF, &inter,
                                errors.data());
  MPI_Info_free(&info);
  const auto failed = std::find_if(errors.begin(), errors.end(), [](int e) { return e != MPI_SUCCESS; });
  if (rc != MPI_SUCCESS || failed != errors.end() || inter == MPI_COMM_NULL) {
    const int code = rc != MPI_SUCCESS ? rc : (failed != errors.end() ? *failed : MPI_ERR_SPAWN);
    throw EngineError(ErrorCode::unsupported,
                      "MPI_Comm_spawn of " + std::to_string(spec.processes) + " rank(s) failed (" + mpi_error_text(code) +
                          "); the MPI runtime needs free slots for them (mpirun --oversubscribe, or a hostfile with "
                          "enough slots) and spawn support (under Slurm use the no-spawn variant: --no-spawn)");
  }
  return Link(std::make_unique<Link::Impl>(inter));
}

Link link_to_parent() {
  if (!comm_info().mpi) return Link();
  MPI_Comm parent = MPI_COMM_NULL;
  MPI_Comm_get_parent(&parent);
  if (parent == MPI_COMM_NULL) return Link();
  return Link(std::make_unique<Link::Impl>(parent));
}

std::vector<Link> link_groups(int32_t color, int32_t num_groups) {
  const CommInfo info = comm_info();
  if (!info.mpi) throw EngineError(ErrorCode::unsupported, "linking worker groups needs MPI: start the ranks with mpirun or srun");
  // Every rank learns every rank's color, so each side knows the job rank of the other side's leader.
  std::vector<int32_t> colors(static_cast<size_t>(info.job_size), -1);
  int rc = MPI_Allgather(&color, 1, MPI_INT32_T, colors.data(), 1, MPI_INT32_T, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) throw EngineError(ErrorCode::internal, "MPI_Allgather of group colors failed: " + mpi_error_text(rc));
  std::vector<int32_t> leader(static_cast<size_t>(num_groups) + 1, -1);
  for (int32_t r = 0; r < info.job_size; ++r) {
    const int32_t c = colors[static_cast<size_t>(r)];
    if (c < 0 || c > num_groups) {
      throw EngineError(ErrorCode::invalid_argument, "job rank " + std::to_string(r) + " has group " + std::to_string(c) +
                                                         ", expected 0.." + std::to_string(num_groups));
    }
    if (leader[static_cast<size_t>(c)] < 0) leader[static_cast<size_t>(c)] = r;
  }
  for (int32_t c = 0; c <= num_groups; ++c) {
    if (leader[static_cast<size_t>(c)] < 0) {
      throw EngineError(ErrorCode::invalid_argument, "no rank of the job belongs to group " + std::to_string(c) +
                                                         ": the job needs the orchestrator plus every group's ranks");
    }
  }
  const MPI_Comm local = comm_world_handle();
  std::vector<Link> links;
  auto create = [&](int32_t remote_leader, int32_t group) {
    MPI_Comm inter = MPI_COMM_NULL;
    const int r = MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, remote_leader, 1000 + group, &inter);
    if (r != MPI_SUCCESS) throw EngineError(ErrorCode::internal, "MPI_Intercomm_create failed: " + mpi_error_text(r));
    links.push_back(Link(std::make_unique<Link::Impl>(inter)));
  };
  if (color == 0) {
    for (int32_t g = 1; g <= num_groups; ++g) create(leader[static_cast<size_t>(g)], g);
  } else {
    create(leader[0], color);
  }
  return links;
}

}  // namespace engine
