// comm over real MPI (run under `mpirun -np N`) and without it (plain run: size-1 no-ops): every collective the
// executor uses gives the numbers it must, on the world and on split groups.
#include <cstdlib>
#include <numeric>
#include <vector>

#include "check.h"
#include "comm/comm.h"

using namespace engine;

static void test_collectives(const Comm& c, const char* name) {
  const int r = c.rank(), n = c.size();
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(r + 1) * static_cast<float>(i);
  c.all_reduce_sum(v.data(), v.size());
  const float tri = static_cast<float>(n * (n + 1) / 2);
  bool ok = true;
  for (size_t i = 0; i < v.size(); ++i) ok &= v[i] == tri * static_cast<float>(i);
  CHECK_MSG(ok, "%s: all_reduce_sum", name);

  std::vector<float> mine = {static_cast<float>(r), static_cast<float>(r * 10)};
  std::vector<float> all(2 * static_cast<size_t>(n));
  c.all_gather(mine.data(), 2, all.data());
  for (int i = 0; i < n; ++i) CHECK(all[2 * i] == i && all[2 * i + 1] == i * 10);

  std::vector<uint8_t> bytes;
  if (r == 0) bytes = {1, 2, 3, 4, 5};
  c.broadcast_bytes(bytes, 0);
  CHECK(bytes == (std::vector<uint8_t>{1, 2, 3, 4, 5}));

  if (n >= 2) {  // ring send/recv: even ranks send first to avoid a deadlock
    int32_t out = 100 + r, in = -1;
    const int next = (r + 1) % n, prev = (r + n - 1) % n;
    if (r % 2 == 0) { c.send(&out, sizeof(out), next, 7); c.recv(&in, sizeof(in), prev, 7); }
    else { c.recv(&in, sizeof(in), prev, 7); c.send(&out, sizeof(out), next, 7); }
    CHECK(in == 100 + prev);
  }
  c.barrier();
}

TEST_MAIN({
  const bool use_mpi = std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr;
  CommInfo info = comm_init(use_mpi);
  CHECK(info.mpi == use_mpi);
  Comm world = comm_world();
  CHECK(world.size() == info.world_size && world.rank() == info.world_rank);
  test_collectives(world, "world");
  // Two groups as tensor-parallel pairs would be: color = rank / 2.
  Comm pairs = world.split(world.rank() / 2, world.rank());
  CHECK(pairs.size() == std::min(2, world.size() - (world.rank() / 2) * 2));
  test_collectives(pairs, "pairs");
  comm_finalize();
})
