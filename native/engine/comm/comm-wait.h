// How a rank waits for an MPI request inside a step (comm unit only). Like Open MPI's own blocking calls it spins on
// the progress engine — the peers are expected within microseconds to seconds, and a spin answers fastest — but it
// tests instead of blocking, so the liveness watch (liveness-watch.h) can look at the clock, answer the leader, and
// end a gang that stopped making progress: a blocking MPI call can never time out.
#pragma once
#include <vector>

#include "comm/liveness-watch.h"

namespace engine {

void wait_request(MPI_Request& request, const WaitSite& site);
void wait_all(std::vector<MPI_Request>& requests, const WaitSite& site);

}  // namespace engine
