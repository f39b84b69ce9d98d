#!/usr/bin/env python3
"""Where every test ran: reads the JUnit reports of one scripts/test.sh run (ctest --output-junit,
one per place: the host, each nested VM) and prints, per test, where it passed; then one line
counting tests passed on the host, passed in the nested VM and skipped with their reasons, and
the closing 'tests: N passed, N failed, N skipped' line.

Exit status 1 if a test failed anywhere, or if a test skipped for want of KVM or of an RDMA
device everywhere it was tried (it ran nowhere), unless --allow-unrun says that was asked for.

    test-summary.py [--costs FILE] [--allow-unrun WHY] PLACE=REPORT.xml ...

--costs FILE keeps each nested VM test's time (name, seconds), which scripts/lib/nested-shards.sh
reads to balance the next run's VMs.
"""
import collections
import re
import sys
import xml.etree.ElementTree as ET

# A skip for want of what the nested VM gives: such a test must run there.
NESTED_GIVES = re.compile(r"/dev/kvm|\bKVM\b|RDMA device", re.I)


def skip_reason(case):
    out = (case.findtext("system-out") or "")
    for line in out.splitlines():
        m = re.search(r"(?:SKIP:|\[  SKIPPED \]|Skipped)\s*(.*\S)", line)
        if m and m.group(1) and not m.group(1).startswith("tests/"):
            return m.group(1)[:160]
    for line in out.splitlines():  # a gtest skip prints its reason on the line before [  SKIPPED ]
        if "needs" in line:
            return line.strip()[:160]
    return "no reason given"


def outcome(case):
    """passed, failed or skipped, with the skip's reason."""
    if case.find("skipped") is not None or case.get("status") in ("notrun", "disabled"):
        return "skipped", skip_reason(case)
    if case.find("failure") is not None or case.get("status") == "fail":
        return "failed", ""
    if "[  SKIPPED ]" in (case.findtext("system-out") or ""):
        return "skipped", skip_reason(case)
    return "passed", ""


def read(report):
    try:
        return ET.parse(report).getroot().iter("testcase")
    except (OSError, ET.ParseError) as e:
        print(f"test-summary: cannot read {report}: {e}", file=sys.stderr)
        return None


def main(argv):
    allow_unrun, costs_file = "", ""
    while len(argv) >= 2 and argv[0] in ("--allow-unrun", "--costs"):
        if argv[0] == "--costs":
            costs_file = argv[1]
        else:
            allow_unrun = argv[1]
        argv = argv[2:]
    costs = {}
    results = collections.defaultdict(dict)  # test -> place -> (outcome, reason)
    places, unreadable = [], []
    for arg in argv:
        place, _, report = arg.partition("=")
        places.append(place)
        cases = read(report)
        if cases is None:
            unreadable.append(place)
            continue
        for case in cases:
            results[case.get("name")][place] = outcome(case)
            if place.startswith("nested"):
                costs[case.get("name")] = case.get("time") or "0"

    if costs_file and costs:
        write_costs(costs_file, costs)
    passed = collections.Counter()
    failed, skipped, unrun = [], collections.Counter(), []
    for test in sorted(results):
        by_place = results[test]
        fails = [p for p, (o, _) in by_place.items() if o == "failed"]
        passes = [p for p, (o, _) in by_place.items() if o == "passed"]
        if fails:
            failed.append(f"{test} ({', '.join(fails)})")
        elif passes:
            passed[passes[0]] += 1
        else:
            reasons = [r for _, r in by_place.values()]
            skipped[reasons[0]] += 1
            if any(NESTED_GIVES.search(r) for r in reasons):
                unrun.append(f"{test}: {reasons[0]}")

    for f in failed:
        print(f"FAILED: {f}")
    if unrun:
        say = "ran nowhere" if not allow_unrun else f"ran nowhere ({allow_unrun})"
        print(f"{len(unrun)} tests {say}, though the nested VM could run them:")
        for u in unrun[:20]:
            print(f"    {u}")
        if len(unrun) > 20:
            print(f"    ... and {len(unrun) - 20} more")
    where = ", ".join(f"{passed[p]} passed {label(p)}" for p in places if passed[p] or p == "host")
    why = "; ".join(f"{n} {r}" for r, n in skipped.most_common())
    print(f"where: {where}; {sum(skipped.values())} skipped" + (f" ({why})" if why else ""))
    for p in unreadable:
        print(f"no report from {p}: its tests are counted nowhere (its log: build/test-reports/)")
    total_failed = len(failed) + (len(unrun) if not allow_unrun else 0) + len(unreadable)
    print(f"tests: {sum(passed.values())} passed, {total_failed} failed, {sum(skipped.values())} skipped")
    return 1 if total_failed else 0


def write_costs(path, costs):
    known = {}
    try:
        with open(path) as f:
            for line in f:
                name, _, secs = line.rstrip("\n").rpartition(" ")
                known[name] = secs
    except OSError:
        pass
    known.update(costs)
    try:
        with open(path, "w") as f:
            for name, secs in sorted(known.items()):
                f.write(f"{name} {float(secs):.1f}\n")
    except (OSError, ValueError) as e:
        print(f"test-summary: cannot write {path}: {e}", file=sys.stderr)


def label(place):
    return "on the host" if place == "host" else f"in the {place}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
