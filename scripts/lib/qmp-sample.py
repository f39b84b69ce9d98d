#!/usr/bin/env python3
"""qmp-sample.py SOCKET INTERVAL_MS STATUS: over one QMP connection to a vmm, prints its
query-migrate as one JSON line every INTERVAL_MS for as long as its status is STATUS (and
until it first is, unless the migration ends first), each with "t": seconds since STATUS was
first seen. For the benchmarks:
one connection polls far faster than a vmmctl process per sample."""
import json
import socket
import sys
import time


def main(path, interval_ms, status):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    f = s.makefile("rw")
    f.readline()  # the greeting
    f.write('{"execute": "qmp_capabilities"}\n')
    f.flush()
    f.readline()
    t0 = None
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        f.write('{"execute": "query-migrate"}\n')
        f.flush()
        line = f.readline()
        while '"event"' in line:  # events may come between answers
            line = f.readline()
        answer = json.loads(line).get("return", {})
        now = time.monotonic()
        if answer.get("status") == status:
            t0 = now if t0 is None else t0
            answer["t"] = now - t0
            print(json.dumps(answer), flush=True)
        elif t0 is not None or answer.get("status") in ("completed", "failed", "cancelled"):
            return  # past it, or over without it
        time.sleep(interval_ms / 1000)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: qmp-sample.py SOCKET INTERVAL_MS STATUS")
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
