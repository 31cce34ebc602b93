// `--dp` across the nodes of a Slurm allocation (pure): where srun puts each task. The orchestrator is task 0 on
// the first node, and every node runs the same number of the replicas' ranks, in order — so the first node runs one
// task more than the others, a layout srun's block distribution does not give (it would fill the first node's
// slots and shift every later replica by one task): the launcher hands srun this list as SLURM_HOSTFILE with
// --distribution=arbitrary.

/** One node name per task (task 0 first), or why the replicas cannot be spread evenly over `nodes`. */
export function dpNodeLayout(nodes: readonly string[], dp: number, ranksPerReplica: number): { hosts: string[] } | { error: string } {
  const ranks = dp * ranksPerReplica;
  if (nodes.length === 0) return { error: 'the allocation lists no nodes' };
  if (ranks % nodes.length !== 0) {
    return { error: `--dp ${dp} x ${ranksPerReplica} rank(s) a replica = ${ranks} ranks do not spread evenly over the allocation's ${nodes.length} nodes (${nodes.join(', ')}): ask for a node count that divides ${ranks}` };
  }
  const perNode = ranks / nodes.length;
  return { hosts: [nodes[0]!, ...nodes.flatMap((n) => Array.from({ length: perNode }, () => n))] };
}
