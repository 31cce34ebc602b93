// Asserts that a call fails with a TrtllmError of the given code whose message matches a pattern, and reports
// what was thrown instead when it does not.
import { TrtllmError } from '../../worker/common/errors.js';

interface Asserter {
  ok(value: unknown, message: string): boolean;
}

function check(t: Asserter, error: unknown, code: string, pattern: RegExp, name: string): void {
  const good = error instanceof TrtllmError && error.code === code && pattern.test(error.message);
  const got = error instanceof Error ? `${(error as { code?: string }).code ?? error.name}: ${error.message}` : String(error);
  t.ok(good, `${name} (${good ? code : `got ${got}`})`);
}

export function expectError(t: Asserter, fn: () => unknown, code: string, pattern: RegExp, name = String(pattern)): void {
  try {
    fn();
  } catch (error) {
    check(t, error, code, pattern, name);
    return;
  }
  t.ok(false, `${name}: expected a ${code} error, nothing was thrown`);
}

export async function expectRejection(t: Asserter, promise: Promise<unknown>, code: string, pattern: RegExp, name = String(pattern)): Promise<void> {
  try {
    await promise;
  } catch (error) {
    check(t, error, code, pattern, name);
    return;
  }
  t.ok(false, `${name}: expected a ${code} rejection, it resolved`);
}
