// A test's scratch directory: made under the system's temp dir and removed when the test (by default the whole
// file) ends, so runs leave nothing behind in /tmp.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import tap from 'tap';

export function tempDir(prefix: string, t: { teardown(fn: () => unknown): void } = tap): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}
