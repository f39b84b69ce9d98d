#!/usr/bin/env python3
"""bench-deadline-drive.py SOCKET URI POLICY DEADLINE_MS [DEST_SOCKET]: starts a migration on the QMP socket
SOCKET (vmm's or QEMU's: the same commands) to URI, samples its query-migrate every 100 ms until
it ends, and prints one JSON line per sample ({"t": seconds since migrate, "q": the answer}).

POLICY:
  none  nothing but the migration (vmm's own x-deadline, if set, acts inside vmm); one still
        running DEADLINE_MS after migrate is cancelled (migrate_cancel) and so recorded
  nova  what OpenStack Nova's libvirt driver does to a QEMU migration, its timeline scaled to
        DEADLINE_MS as its completion timeout: downtime-limit raised from 50 to 500 ms in 10
        steps (live_migration_downtime 500, _steps 10, _delay 75 s per GiB of an
        800 s-per-GiB completion timeout: step i at i * 75/800 of it), then at the timeout
        migrate-start-postcopy (live_migration_timeout_action force_complete with
        live_migration_permit_post_copy).
  nova-ac  the same when post-copy is not permitted (live_migration_permit_auto_converge): the
        caller turned auto-converge on before; at the timeout the guest is paused (`stop`, as
        Nova's force_complete without post-copy pauses the instance) so the migration ends as a
        stop-and-copy; once it has, the destination is resumed (`cont` on DEST_SOCKET) as
        libvirt resumes it.
Also printed, last: {"policy": [[t, what], ...]} (what the policy did, when)."""
import json
import socket
import sys
import time

ENDED = ("completed", "failed", "cancelled")


class Qmp:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.connect(path)
        self.f = self.s.makefile("rw")
        self.f.readline()  # the greeting
        self.call("qmp_capabilities")

    def call(self, name, args=None):
        cmd = {"execute": name}
        if args is not None:
            cmd["arguments"] = args
        self.f.write(json.dumps(cmd) + "\n")
        self.f.flush()
        while True:
            line = self.f.readline()
            if not line:
                raise RuntimeError("the QMP peer closed the connection")
            answer = json.loads(line)
            if "event" in answer:
                continue
            if "error" in answer:
                raise RuntimeError("%s: %s" % (name, answer["error"].get("desc", answer["error"])))
            return answer.get("return")


def nova_steps(deadline_s):
    """(seconds after migrate, downtime-limit ms) for Nova's downtime steps, scaled."""
    steps, top = 10, 500
    base = top / steps
    offset = (top - base) / steps
    delay = deadline_s * 75.0 / 800.0
    return [(delay * i, int(base + offset * i)) for i in range(steps + 1)]


def main(path, uri, policy, deadline_ms, dest=None):
    q = Qmp(path)
    deadline_s = deadline_ms / 1000.0
    steps = nova_steps(deadline_s) if policy in ("nova", "nova-ac") else []
    done = []
    switched = False
    t0 = time.monotonic()
    q.call("migrate", {"uri": uri})
    limit = t0 + max(600.0, 4 * deadline_s)
    while time.monotonic() < limit:
        t = time.monotonic() - t0
        while steps and steps[0][0] <= t:
            _, ms = steps.pop(0)
            q.call("migrate-set-parameters", {"downtime-limit": ms})
            done.append([round(t, 3), "downtime-limit %d" % ms])
        answer = q.call("query-migrate") or {}
        print(json.dumps({"t": round(time.monotonic() - t0, 3), "q": answer}), flush=True)
        status = answer.get("status", "")
        if status in ENDED:
            break
        if policy == "none" and t >= deadline_s and status == "active":
            try:
                q.call("migrate_cancel")  # QEMU's name
            except RuntimeError:
                q.call("migrate-cancel")  # vmm's
            done.append([round(t, 3), "migrate_cancel"])
            deadline_s = float("inf")
        if policy == "nova" and not switched and t >= deadline_s and status == "active":
            q.call("migrate-start-postcopy")
            switched = True
            done.append([round(t, 3), "migrate-start-postcopy"])
        if policy == "nova-ac" and not switched and t >= deadline_s and status == "active":
            q.call("stop")
            switched = True
            done.append([round(t, 3), "stop"])
        time.sleep(0.1)
    if policy == "nova-ac" and switched and dest and status == "completed":
        d = Qmp(dest)
        for _ in range(100):  # the destination's side ends a little after the source's
            if (d.call("query-migrate") or {}).get("status") == "completed":
                break
            time.sleep(0.1)
        d.call("cont")
        done.append([round(time.monotonic() - t0, 3), "cont (destination)"])
    print(json.dumps({"policy": done}), flush=True)


if __name__ == "__main__":
    if len(sys.argv) not in (5, 6) or sys.argv[3] not in ("none", "nova", "nova-ac"):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5] if len(sys.argv) == 6 else None)
