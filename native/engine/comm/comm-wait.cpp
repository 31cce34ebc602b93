#include "comm/comm-wait.h"

namespace engine {

void wait_request(MPI_Request& request, const WaitSite& site) {
  int done = 0;
  comm_check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), site.op);
  if (done) return;
  LivenessWait wait(site, WaitKind::in_step);
  for (;;) {
    comm_check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), site.op);
    if (done) return;
    wait.tick();
  }
}

void wait_all(std::vector<MPI_Request>& requests, const WaitSite& site) {
  if (requests.empty()) return;
  const int n = static_cast<int>(requests.size());
  int done = 0;
  comm_check(MPI_Testall(n, requests.data(), &done, MPI_STATUSES_IGNORE), site.op);
  if (done) return;
  LivenessWait wait(site, WaitKind::in_step);
  for (;;) {
    comm_check(MPI_Testall(n, requests.data(), &done, MPI_STATUSES_IGNORE), site.op);
    if (done) return;
    wait.tick();
  }
}

}  // namespace engine
