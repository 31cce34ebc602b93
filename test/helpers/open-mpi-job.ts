// One Open MPI job of a test, and what it leaves on this machine: its mpirun, its job family (read from a rank's
// environment while it runs) and its files — the session directory <tmp>/ompi.<host>.<uid>/pid.<mpirun pid> and
// the shared-memory segments /dev/shm/vader_segment.<host>.<uid>.<jobid hex>.<local rank>. Other jobs on the
// machine create their own files at the same time, so only this job's are ever looked at. Written apart from the
// launcher's own cleanup (launcher/cluster/open-mpi-files.ts), so the tests do not check that code with itself.
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { processesWith } from './processes.js';

export interface OpenMpiJob {
  mpirunPid: number;
  family: string;      // the job family in hex, as segment names carry it (jobid = family << 16 | job number)
}

/** The job whose processes carry `marker` (command line, or environment with `inEnv`), once a rank of it runs. */
export function openMpiJob(marker: string, inEnv = false): OpenMpiJob | undefined {
  const processes = processesWith(marker, inEnv);
  const mpirun = processes.find((p) => /(^|\/)(mpirun|orterun|mpiexec) /.test(p.cmd));
  for (const p of processes) {
    try {
      const jobid = /(?:^|\0)OMPI_MCA_ess_base_jobid=(\d+)/.exec(readFileSync(`/proc/${p.pid}/environ`, 'utf8'))?.[1];
      if (mpirun && jobid) return { mpirunPid: mpirun.pid, family: (Number(jobid) >>> 16).toString(16) };
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

/** The job's files still on this machine (none once it ended in order, or was cleaned up after). */
export function openMpiFilesLeft(job: OpenMpiJob): string[] {
  const uid = process.getuid?.() ?? 0;
  const left: string[] = [];
  for (const top of readdirSync(tmpdir()).filter((n) => n.startsWith('ompi.') && n.endsWith(`.${uid}`))) {
    if (readdirSync(join(tmpdir(), top)).includes(`pid.${job.mpirunPid}`)) left.push(join(tmpdir(), top, `pid.${job.mpirunPid}`));
  }
  const segment = new RegExp(`^vader_segment\\..+\\.${uid}\\.${job.family}[0-9a-f]{4}\\.\\d+$`);
  for (const name of readdirSync('/dev/shm')) if (segment.test(name)) left.push(join('/dev/shm', name));
  return left;
}

/** Whether every port can be bound on all interfaces again (as the launcher's pre-check binds them). */
export async function portsFree(ports: number[]): Promise<boolean> {
  for (const port of ports) {
    const free = await new Promise<boolean>((resolve) => {
      const s = createServer();
      s.once('error', () => resolve(false));
      s.listen(port, '0.0.0.0', () => s.close(() => resolve(true)));
    });
    if (!free) return false;
  }
  return true;
}
