// A stand-in rank for test/worker/lifeline.test.ts, so the rank's lifeline is tested on real processes:
//   node lifeline-child.js parent <mode>   starts `<mode>` below as its child (same environment) and idles
//   node lifeline-child.js bind            PR_SET_PDEATHSIG(SIGKILL), prints `bound <pid>`, idles
//   node lifeline-child.js watch           watches the launcher named by TRTLLM_LAUNCHED_BY, prints `watching <bool>`
//   node lifeline-child.js stdin           watches its stdin as the launcher's lifeline, prints `watching <bool>`
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { fileURLToPath } from 'node:url';

import { loadAddon } from '../../worker/binding/load-addon.js';
import { watchLauncher, watchLauncherStdin } from '../../worker/lifeline.js';

const [mode, childMode = 'bind'] = process.argv.slice(2);
setInterval(() => {}, 60_000);  // idles until killed
if (mode === 'parent') {
  spawn(process.execPath, [fileURLToPath(import.meta.url), childMode], { stdio: 'inherit' });
} else if (mode === 'bind') {
  loadAddon().setParentDeathSignal(constants.signals.SIGKILL);
  process.stdout.write(`bound ${process.pid}\n`);
} else if (mode === 'watch') {
  process.stdout.write(`watching ${watchLauncher()}\n`);
} else if (mode === 'stdin') {
  process.stdout.write(`watching ${watchLauncherStdin()}\n`);
} else {
  process.stderr.write(`unknown mode ${mode}\n`);
  process.exit(2);
}
