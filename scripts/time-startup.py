#!/usr/bin/env python3
"""Whole-process cost of switchyard's weight-free commands: wall time and peak RSS, median of N.

Issue #20's targets, on the 2-core dev VM with the CUDA build: `switchyard --help` under 15 ms and
`check` of the DeepSeek-V3 8-GPU profile under 50 ms, median of 10 whole processes.

    scripts/time-startup.py [--binary ./build/switchyard] [--runs 10]

Each run is one fork and exec of the binary, timed from before the fork to the reaped exit, with
stdout and stderr to /dev/null. The peak RSS comes from a second run of each under GNU time
(`/usr/bin/time -f %M`): a child forked from this script would count the script's own RSS, which
Linux carries across exec. A first run of each command, not counted, pages the binary in. The same
figures for /bin/true are printed first: what process creation costs on the machine by itself.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECK_ARGS = ["check", "--arch", "deepseek-v3", "--optimize_config_path",
              os.path.join(ROOT, "optimize_rules", "DeepSeek-V3-Chat-multi-gpu-8.yaml")]


def wall_ms(argv):
    """The wall time of one process, fork to reaped exit, and its exit status."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        try:
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    elapsed = (time.perf_counter() - start) * 1000
    os.close(devnull)
    return elapsed, os.waitstatus_to_exitcode(status)


def peak_rss_mib(argv):
    """The peak RSS of one process, as GNU time reports it."""
    with tempfile.NamedTemporaryFile(mode="r") as report:
        subprocess.run(["/usr/bin/time", "-o", report.name, "-f", "%M"] + argv,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        return int(report.read().split()[-1]) / 1024


def measure(name, argv, runs):
    wall_ms(argv)
    timed = [wall_ms(argv) for _ in range(runs)]
    walls = [t[0] for t in timed]
    statuses = sorted({t[1] for t in timed})
    rss = [peak_rss_mib(argv) for _ in range(runs)]
    print(f"{name:<8} wall median {statistics.median(walls):6.1f} ms ({min(walls):.1f}-{max(walls):.1f}), "
          f"peak RSS median {statistics.median(rss):6.1f} MiB ({min(rss):.1f}-{max(rss):.1f}), "
          f"{runs} runs, exit status {','.join(map(str, statuses))}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=os.path.join(ROOT, "build", "switchyard"))
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    binary = os.path.abspath(args.binary)
    if not os.access(binary, os.X_OK):
        print(f"time-startup.py: no executable at {binary} (build it, or pass --binary)", file=sys.stderr)
        return 2
    if args.runs < 1:
        print("time-startup.py: --runs must be 1 or more", file=sys.stderr)
        return 2
    print(f"{binary}, load average {os.getloadavg()[0]:.2f} at the start")
    measure("true", ["/bin/true"], args.runs)
    measure("--help", [binary, "--help"], args.runs)
    measure("check", [binary] + CHECK_ARGS, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
