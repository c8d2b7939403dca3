"""Clean-builder cost: how long a cache miss takes from request to cached build, with a fresh
builder process per build (start-up, torch import, then the compile) and with a spare builder
waiting (only the compile). The difference is what a spare takes off a cold candidate's critical
path. No GPU needed: the builds are small C++ extensions, each with a key of its own.

    python bench/builder_bench.py [--builds N] [OUT.md]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from workbench import cuda_env
from workbench.gpu import buildhook, clean_build


def specs(n: int, tag: str) -> list[dict]:
    return [buildhook.spec_of(f"b{i}", f"int f(int x) {{ return x + {i}; }} // {tag}",
                              functions=["f"]) for i in range(n)]


def timed_builds(builders: clean_build.Builders, todo: list[dict], spare: bool) -> list[float]:
    seconds = []
    for spec in todo:
        if spare:  # the steady state a pool aims for: a builder waits when the miss comes
            end = time.monotonic() + 120
            while not builders.waiting() and time.monotonic() < end:
                time.sleep(0.1)
            time.sleep(8.0)  # its torch import done (it waits on stdin after that)
        start = time.monotonic()
        builders.build(spec, 600, threading.Event())
        seconds.append(time.monotonic() - start)
    return seconds


def main(out: Path | None, n: int) -> None:
    base = cuda_env.build_env()
    os.environ["TORCH_CUDA_ARCH_LIST"] = base["TORCH_CUDA_ARCH_LIST"]  # the builders' toolchain
    cache = Path(tempfile.mkdtemp(prefix="kwb-builder-bench-"))
    tag = str(time.time_ns())
    rows = []
    with ThreadPoolExecutor(1, thread_name_prefix="kwb-launch") as launcher:
        # The first build of a fresh cache may build torch's precompiled header: not counted.
        clean_build.Builders(cache, base, launcher).build(specs(1, "warm")[0], 900,
                                                          threading.Event())
        for spare in (False, True):
            builders = clean_build.Builders(cache, base, launcher, spares=1 if spare else 0)
            builders.ensure()
            try:
                got = timed_builds(builders, specs(n, f"{tag}-{spare}"), spare)
            finally:
                builders.close()
            rows.append((spare, got))
    cold = statistics.median(rows[0][1])
    warm = statistics.median(rows[1][1])
    lines = [f"### Clean builder — {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, "
             f"{n} builds per row", "",
             "| builder | median s | min s | max s |", "|---|---|---|---|"]
    for spare, got in rows:
        lines.append(f"| {'spare waiting' if spare else 'started per build'} | "
                     f"{statistics.median(got):.2f} | {min(got):.2f} | {max(got):.2f} |")
    lines += ["", f"A waiting spare takes {cold - warm:.2f} s (median) off each cold build."]
    text = "\n".join(lines)
    if out:
        out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path)
    parser.add_argument("--builds", type=int, default=3)
    args = parser.parse_args()
    main(args.out, args.builds)
