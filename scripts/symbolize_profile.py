#!/usr/bin/env python3
"""Reads a sampling profile (bench/sampling_profile.h) and prints where the host threads spent
their time: the functions most often on top of the stack (self) and anywhere on it (total).

    scripts/symbolize_profile.py PROFILE [--lib-dir DIR ...] [--top 40]

Addresses are mapped to the file and offset of /proc/self/maps recorded with the samples
and named with addr2line; a file is looked for under each --lib-dir by its base name
(the profiled machine's paths need not exist here)."""
import argparse
import collections
import os
import subprocess
import sys


def load(path):
    samples, maps = [], []
    with open(path) as f:
        for line in f:
            if line.startswith("sample"):
                samples.append([int(a, 16) for a in line.split()[1:]])
            elif line.startswith("map "):
                parts = line[4:].split()
                if len(parts) >= 6 and "x" in parts[1]:
                    lo, hi = (int(v, 16) for v in parts[0].split("-"))
                    maps.append((lo, hi, int(parts[2], 16), parts[5]))
    return samples, maps


def locate(addr, maps):
    for lo, hi, off, name in maps:
        if lo <= addr < hi:
            return name, addr - lo + off
    return None, addr


def find_file(name, dirs):
    if os.path.exists(name):
        return name
    for d in dirs:
        p = os.path.join(d, os.path.basename(name))
        if os.path.exists(p):
            return p
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("profile")
    ap.add_argument("--lib-dir", action="append", default=[])
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    samples, maps = load(args.profile)
    if not samples:
        sys.exit(f"{args.profile}: no samples")
    # Return addresses point after the call: look up the byte before them (not for the top frame).
    where = {}
    for s in samples:
        for i, a in enumerate(s[2:]):  # frames 0-1: the signal handler and the signal trampoline
            where.setdefault(a if i == 0 else a - 1, None)
    by_file = collections.defaultdict(list)
    for a in where:
        name, off = locate(a, maps)
        by_file[name].append((a, off))
    for name, items in by_file.items():
        path = find_file(name, args.lib_dir) if name else None
        if not path:
            for a, _ in items:
                where[a] = os.path.basename(name) if name else "?"
            continue
        out = subprocess.run(["addr2line", "-f", "-C", "-e", path] + [hex(o) for _, o in items],
                             capture_output=True, text=True).stdout.splitlines()
        for k, (a, _) in enumerate(items):
            fn = out[2 * k] if 2 * k < len(out) else "?"
            where[a] = fn if fn != "??" else os.path.basename(name) + "+?"
    self_count, total_count = collections.Counter(), collections.Counter()
    for s in samples:
        frames = [where[a if i == 0 else a - 1] for i, a in enumerate(s[2:])]
        if not frames:
            continue
        self_count[frames[0]] += 1
        for fn in set(frames):
            total_count[fn] += 1
    n = len(samples)
    print(f"{n} samples")
    for title, c in (("self", self_count), ("total", total_count)):
        print(f"\n{title}:")
        for fn, k in c.most_common(args.top):
            print(f"{100.0 * k / n:6.1f}%  {fn[:160]}")


if __name__ == "__main__":
    main()
