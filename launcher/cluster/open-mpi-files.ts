// Open MPI's files of one mpirun on this host, and their removal when mpirun could not remove them itself (killed
// with SIGKILL: issue 22 found them left by every forced stop). Open MPI 4 (ORTE) writes, per mpirun:
//   <tmp>/ompi.<node>.<uid>/pid.<mpirun pid>/             the session directory (contact.txt, PMIx's stores, job dirs)
//   /dev/shm/vader_segment.<node>.<uid>.<jobid hex>.<local rank>   the shared-memory segment of each local rank
// where a jobid is the job family (16 bits, contact.txt's first number >> 16) and the job's number below it — every
// job of one mpirun, the groups an orchestrator spawns included, shares the family. Only what is provably this
// mpirun's is touched: other jobs on the host write their own files beside these at the same time.
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface OpenMpiLayout {
  tmp: string;        // where ORTE puts session directories (orte_tmpdir_base, else TMPDIR, else /tmp)
  shm: string;        // where vader puts its segments (btl_vader_backing_directory, else /dev/shm)
  uid: number;
}

/** Where Open MPI puts its files for this environment (the MCA variables a user may have set win, as in Open MPI). */
export function openMpiLayout(env: NodeJS.ProcessEnv = process.env): OpenMpiLayout {
  return {
    tmp: env.OMPI_MCA_orte_tmpdir_base ?? tmpdir(),
    shm: env.OMPI_MCA_btl_vader_backing_directory ?? '/dev/shm',
    uid: process.getuid?.() ?? 0,
  };
}

/** The job family of an mpirun from its session directory's contact.txt ("640090112.0;tcp://..."; pure). */
export function jobFamilyOfContact(contact: string): number | undefined {
  const m = /^(\d+)\./.exec(contact);
  return m ? Number(m[1]) >>> 16 : undefined;
}

/** Whether a file name is a vader segment of job family `family` and user `uid` (pure). */
export function isVaderSegmentOf(name: string, family: number, uid: number): boolean {
  const m = /^vader_segment\..+\.(\d+)\.([0-9a-f]+)\.\d+$/.exec(name);
  return m !== null && Number(m[1]) === uid && parseInt(m[2]!, 16) >>> 16 === family;
}

/** The session directories of mpirun `pid` made since `sinceMs` (an older one with the same pid is another
 * mpirun's, which had the pid before). */
function sessionDirs(layout: OpenMpiLayout, pid: number, sinceMs: number): string[] {
  let tops: string[];
  try {
    tops = readdirSync(layout.tmp).filter((n) => n.startsWith('ompi.') && n.endsWith(`.${layout.uid}`));
  } catch {
    return [];
  }
  return tops.map((top) => join(layout.tmp, top, `pid.${pid}`)).filter((dir) => {
    try {
      const st = statSync(dir);
      return st.isDirectory() && st.uid === layout.uid && st.mtimeMs >= sinceMs - 1000;
    } catch {
      return false;
    }
  });
}

/** Removes what mpirun `pid` (started at `sinceMs`) left on this host; the paths removed (none after a clean end). */
export function removeOpenMpiFiles(pid: number, sinceMs: number, layout: OpenMpiLayout = openMpiLayout()): string[] {
  const removed: string[] = [];
  for (const dir of sessionDirs(layout, pid, sinceMs)) {
    const contact = join(dir, 'contact.txt');
    const family = existsSync(contact) ? jobFamilyOfContact(readFileSync(contact, 'utf8')) : undefined;
    if (family !== undefined) {
      let names: string[] = [];
      try {
        names = readdirSync(layout.shm);
      } catch {
        // no shared-memory directory: nothing there
      }
      for (const name of names.filter((n) => isVaderSegmentOf(n, family, layout.uid))) {
        rmSync(join(layout.shm, name), { force: true });
        removed.push(join(layout.shm, name));
      }
    }
    rmSync(dir, { recursive: true, force: true });
    removed.push(dir);
  }
  return removed;
}
