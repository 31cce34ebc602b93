// `config print` output (pure): aligned text for people, JSON for machines, from the same settings.
import type { EffectiveConfig, Setting } from './effective-config.js';

function valueText(s: Setting): string {
  if (s.value === undefined) return s.unset ?? '-';
  return typeof s.value === 'string' ? s.value : JSON.stringify(s.value);
}

function fromText(s: Setting): string {
  const where = s.source === 'default' ? 'default' : `${s.source} ${s.origin}`;
  return s.ignored ? `${where}; ${s.ignored}` : where;
}

export function renderConfigText(config: EffectiveConfig): string {
  const rows = config.settings.map((s) => [s.key, valueText(s), fromText(s)] as const);
  const header = ['key', 'value', 'from'] as const;
  const width = (i: number) => Math.max(header[i]!.length, ...rows.map((r) => r[i]!.length));
  const line = (r: readonly string[]) => `${r[0]!.padEnd(width(0))}  ${r[1]!.padEnd(width(1))}  ${r[2]}`;
  const file = config.file ? `configuration file: ${config.file.path} (${config.file.via})` : 'configuration file: none (--config, TRTLLM_CONFIG or --model-repo)';
  const notes = (config.file?.notes ?? []).map((n) => `note: ${n}`);
  return [file, line(header), ...rows.map(line), ...notes].join('\n');
}

export function renderConfigJson(config: EffectiveConfig): string {
  const settings = Object.fromEntries(config.settings.map((s) => [s.key, {
    value: s.value ?? null, source: s.source, origin: s.origin,
    ...(s.flag ? { flag: s.flag } : {}), ...(s.ignored ? { ignored: s.ignored } : {}),
    ...(s.value === undefined && s.unset ? { unset: s.unset } : {}),
  }]));
  const file = config.file ? { path: config.file.path, via: config.file.via, ...(config.file.notes?.length ? { notes: config.file.notes } : {}) } : null;
  return JSON.stringify({ file, settings }, null, 2);
}
