// Slurm's --time spellings (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, UNLIMITED) as seconds, so the
// drain signal can be placed inside the limit (pure).
import { InvalidArgumentError } from 'commander';

/** Seconds in a Slurm time limit; Infinity for UNLIMITED/INFINITE. Throws naming --time and the value. */
export function parseTimeLimit(value: string): number {
  const v = value.trim();
  if (/^(unlimited|infinite)$/i.test(v)) return Infinity;
  const bad = () => new InvalidArgumentError(
    `--time must be a Slurm time limit (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS), got "${value}"`);
  const withDays = /^(\d+)-(\d+)(?::(\d+))?(?::(\d+))?$/.exec(v);
  let seconds: number;
  if (withDays) {
    const [d, h, m, s] = withDays.slice(1).map((x) => (x === undefined ? undefined : Number(x))) as [number, number, number | undefined, number | undefined];
    seconds = ((d * 24 + h) * 60 + (m ?? 0)) * 60 + (s ?? 0);
  } else {
    const parts = v.split(':');
    if (parts.length > 3 || parts.some((p) => !/^\d+$/.test(p))) throw bad();
    const n = parts.map(Number);
    seconds = n.length === 1 ? n[0]! * 60 : n.length === 2 ? n[0]! * 60 + n[1]! : (n[0]! * 60 + n[1]!) * 60 + n[2]!;
  }
  if (seconds <= 0) throw bad();
  return seconds;
}
