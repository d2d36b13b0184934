#!/usr/bin/env python3
"""kill -9 a process the moment a file it writes appears: the fault tests' trigger (tests/e2e/fault_*.sh).

Usage: kill_when.py PID ROOT REGEX [COUNT] [TIMEOUT_S]
Polls ROOT recursively (about every 0.2 ms) for paths, relative to ROOT, that match REGEX (re.search) and
were not there when it started. When COUNT (default 1) of them have been seen, it sends SIGKILL to PID and
prints "killed after N new (T temporaries), last: <path>". Prints "watching" once the initial
listing is taken: start the operation after that line. Exit 0: killed; 1: TIMEOUT_S (default 20) passed
without COUNT matches (nothing was killed); 2: PID had exited first.
Temporary files live for milliseconds, so the poll sees some and misses others: a regex should match an
object's temporary and its final name both.
"""
import os
import re
import signal
import sys
import time


def walk(root):
    out = []
    stack = [root]
    while stack:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                for e in it:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                    else:
                        out.append(os.path.relpath(e.path, root))
        except (FileNotFoundError, NotADirectoryError):
            pass
    return out


def main():
    pid, root, pattern = int(sys.argv[1]), sys.argv[2], re.compile(sys.argv[3])
    count = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    timeout = float(sys.argv[5]) if len(sys.argv) > 5 else 20.0
    before = set(walk(root))
    print("watching", flush=True)
    seen = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for p in walk(root):
            if p not in before and p not in seen and pattern.search(p):
                seen.append(p)
        if len(seen) >= count:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                print(f"exited before the kill, after {len(seen)} new", flush=True)
                return 2
            temps = sum(1 for p in seen if "~tmp" in p)
            print(f"killed after {len(seen)} new ({temps} temporaries), last: {seen[-1].split('/', 2)[-1]}", flush=True)
            return 0
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            print(f"exited before the kill, after {len(seen)} new", flush=True)
            return 2
        time.sleep(0.0002)
    print(f"no kill: {len(seen)} new in {timeout} s", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
