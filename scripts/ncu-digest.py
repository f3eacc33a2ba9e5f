#!/usr/bin/env python3
"""Sums ncu's per-launch CSV (--csv --print-units base --metrics gpu__time_duration.sum) by kernel:
launches, total and mean time, share of the total, largest first. Usage: ncu-digest.py FILE [N]."""
import collections
import csv
import sys

rows = []
with open(sys.argv[1], newline="") as f:
    lines = [line for line in f if line.startswith('"')]  # skip the application's own output
for record in csv.DictReader(lines):
    if record.get("Metric Name") == "gpu__time_duration.sum":
        name = record["Kernel Name"].replace("(anonymous namespace)::", "").split("(")[0]
        name = name.removeprefix("void ").replace("switchyard::cuda::", "")
        rows.append((name, float(record["Metric Value"].replace(",", ""))))
total = sum(t for _, t in rows) or 1.0
by_kernel = collections.defaultdict(list)
for name, t in rows:
    by_kernel[name].append(t)
print(f"{len(rows)} launches, {total / 1e3:.1f} us in all")
for name, times in sorted(by_kernel.items(), key=lambda item: -sum(item[1]))[: int(sys.argv[2]) if len(sys.argv) > 2 else 25]:
    print(f"{sum(times) / 1e3:10.1f} us {100 * sum(times) / total:5.1f}% {len(times):5d} x {sum(times) / len(times) / 1e3:8.2f} us  {name}")
