// Orchestrator mode's channels (part of the comm unit): byte messages between the orchestrator and the leader of
// each worker group, over an MPI intercommunicator. The orchestrator holds one Link per group, a group's rank 0
// holds one to the orchestrator. Both directions are non-blocking (MPI_Isend / MPI_Iprobe), so a dead peer never
// hangs the side that is still alive: the orchestrator notices the death by other means (it watches the group's
// processes) and simply stops using the link. Needs MPI_THREAD_MULTIPLE: comm_init(true, true).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace engine {

class Link {
 public:
  Link();  // unconnected: post() and poll() do nothing
  ~Link();
  Link(Link&&) noexcept;
  Link& operator=(Link&&) noexcept;

  bool connected() const;
  // Queues `bytes` for the peer's rank 0 under `tag` (>= 0) and starts sending; the buffer is kept until MPI is done
  // with it. Thread-safe.
  void post(int32_t tag, std::vector<uint8_t> bytes);
  // One arrived message, if any (tag and bytes); also completes finished sends. Thread-safe.
  bool poll(int32_t& tag, std::vector<uint8_t>& bytes);
  // Sends still in flight.
  size_t pending() const;
  // Orderly end, once both sides are done with the link: MPI_Comm_disconnect (collective with the peer group, so
  // MPI_Finalize does not wait for it later). Never for a dead peer: just drop the Link.
  void disconnect();

  struct Impl;

 private:
  explicit Link(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  friend Link link_spawn(const struct SpawnSpec&);
  friend Link link_to_parent();
  friend std::vector<Link> link_groups(int32_t, int32_t);
};

struct SpawnSpec {
  std::string command;             // the program (absolute path)
  std::vector<std::string> args;   // its arguments
  int32_t processes = 1;           // ranks of the new group
  std::string host;                // where to start them ("" : wherever the MPI runtime places them)
};

// MPI_Comm_spawn from this process alone: starts a group and returns the link to it. Blocks until every rank of the
// group has called MPI_Init. Throws EngineError(unsupported) when the runtime refuses (no slots, no spawn support).
Link link_spawn(const SpawnSpec& spec);
// In a spawned group: the link to the orchestrator that spawned it (unconnected when not spawned).
Link link_to_parent();
// Without spawning, after comm_join_group: collective over the whole job. The orchestrator (color 0, job rank 0)
// gets one link per group color 1..num_groups; each rank of a group gets its link to the orchestrator (used by the
// group's rank 0).
std::vector<Link> link_groups(int32_t color, int32_t num_groups);

}  // namespace engine
