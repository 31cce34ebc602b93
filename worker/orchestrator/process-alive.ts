// Whether a process of this host still exists (signal 0 checks without signalling; EPERM still means it exists).
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}
