// "Hosts" on one machine for multi-node tests: a network namespace per host, each with a veth on a shared bridge
// and its own address in a private /24; the bridge holds .1 (the test's own side), host i holds .(i + 2). Nothing
// outside that subnet is involved.
import { execa } from 'execa';

export interface NetnsHosts {
  subnet: string;                       // "10.214.57"
  bridgeAddr: string;                   // subnet.1
  hosts: { name: string; netns: string; addr: string }[];
  remove(): Promise<void>;
}

async function sh(command: string): Promise<{ ok: boolean; out: string }> {
  const r = await execa('sh', ['-c', command], { reject: false, all: true });
  return { ok: r.exitCode === 0, out: r.all ?? '' };
}

/** Creates the hosts, or returns why it cannot (not root, no CAP_NET_ADMIN, no iproute2) after undoing any part. */
export async function createNetnsHosts(tag: string, subnet: string, names: string[]): Promise<NetnsHosts | { skip: string }> {
  const bridge = `br${tag}`;
  const hosts = names.map((name, i) => ({ name, netns: `trtl-${tag}-${name}`, addr: `${subnet}.${i + 2}`, veth: `ve${tag}${i}` }));
  const remove = async () => {
    for (const h of hosts) await sh(`ip netns del ${h.netns} 2>/dev/null; ip link del ${h.veth} 2>/dev/null`);
    await sh(`ip link del ${bridge} 2>/dev/null`);
  };
  const steps = [`ip link add ${bridge} type bridge`, `ip addr add ${subnet}.1/24 dev ${bridge}`, `ip link set ${bridge} up`];
  for (const h of hosts) {
    steps.push(
      `ip netns add ${h.netns}`,
      `ip link add ${h.veth} type veth peer name eth0 netns ${h.netns}`,
      `ip link set ${h.veth} master ${bridge} up`,
      `ip -n ${h.netns} addr add ${h.addr}/24 dev eth0`,
      `ip -n ${h.netns} link set eth0 up`,
      `ip -n ${h.netns} link set lo up`,
    );
  }
  for (const step of steps) {
    const r = await sh(step);
    if (!r.ok) {
      await remove();
      return { skip: `cannot create network namespaces here (${step}: ${r.out.trim()}); run as root on Linux with iproute2` };
    }
  }
  return { subnet, bridgeAddr: `${subnet}.1`, hosts: hosts.map(({ name, netns, addr }) => ({ name, netns, addr })), remove };
}

/** pids of the processes inside a host's network namespace. */
export async function netnsPids(netns: string): Promise<number[]> {
  const r = await execa('ip', ['netns', 'pids', netns], { reject: false });
  return (r.stdout ?? '').split('\n').filter((p) => /^\d+$/.test(p)).map(Number);
}
