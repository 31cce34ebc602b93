"""Sums an `ncu --csv --page raw --metrics gpu__time_duration.sum` log by kernel: count, total µs, share."""
import csv
import re
import sys
from collections import defaultdict

path, title = sys.argv[1], sys.argv[2]
lines = [l for l in open(path, errors="replace") if l.startswith('"')]
rows = list(csv.DictReader(lines))
total = defaultdict(float)
count = defaultdict(int)
for r in rows:
    name = r.get("Kernel Name", "")
    value = r.get("gpu__time_duration.sum", "")
    try:
        ns = float(value.replace(",", ""))
    except ValueError:
        continue  # the units row
    m = re.search(r"(\w+_kernel)", name)
    short = m.group(1) if m else re.sub(r"<.*", "", re.sub(r"^void ", "", name))[:60]
    if "gemm" in name.lower() or "sm90" in name or "cutlass" in name.lower():
        short = "cuBLAS " + short[:48]
    total[short] += ns / 1000
    count[short] += 1
all_us = sum(total.values())
print(f"\n### {title}: {len(rows) - 1} kernels, {all_us:.1f} µs of GPU time")
print("| kernel | count | µs | share |\n|---|---|---|---|")
for k, v in sorted(total.items(), key=lambda kv: -kv[1]):
    print(f"| {k} | {count[k]} | {v:.1f} | {100 * v / all_us:.1f}% |")
