// A stand-in rank for test/worker/lifeline.test.ts, so the rank's lifeline is tested on real processes:
//   node lifeline-child.js parent   starts `bind` below as its child and idles (the test kills this parent)
//   node lifeline-child.js bind     PR_SET_PDEATHSIG(SIGKILL), prints `bound <pid>`, idles
//   node lifeline-child.js watch    watches the launcher named by TRTLLM_LAUNCHED_BY, prints `watching <true|false>`, idles
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { fileURLToPath } from 'node:url';

import { loadAddon } from '../../worker/binding/load-addon.js';
import { watchLauncher } from '../../worker/lifeline.js';

const mode = process.argv[2];
setInterval(() => {}, 60_000);  // idles until killed
if (mode === 'parent') {
  spawn(process.execPath, [fileURLToPath(import.meta.url), 'bind'], { stdio: 'inherit' });
} else if (mode === 'bind') {
  loadAddon().setParentDeathSignal(constants.signals.SIGKILL);
  process.stdout.write(`bound ${process.pid}\n`);
} else if (mode === 'watch') {
  process.stdout.write(`watching ${watchLauncher()}\n`);
} else {
  process.stderr.write(`unknown mode ${mode}\n`);
  process.exit(2);
}
