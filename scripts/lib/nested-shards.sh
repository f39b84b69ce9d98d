#!/usr/bin/env bash
# nested-shards.sh VMS REPORT_DIR LABELS EXTRA_REGEX: shares the tests labelled LABELS (a ctest
# -L expression; empty for none) and those matching EXTRA_REGEX (empty for none) out between VMS
# nested VMs. Each gets REPORT_DIR/shard-N/ with a CTestTestfile.cmake that points at the build
# tree (so each ctest keeps its own Testing/ and report), ids.txt (ctest -I: its tests by number)
# and tests.txt (their names). Costs measured in an earlier run ($BUILD/nested-costs.txt, written
# by test-summary.py; tests/nested-costs.txt in a new tree) balance the shares; a test with no
# measured cost counts as the mean. tests/nested-costs.txt holds the rdma and ktls tests' costs from
# a run with KVM and the kvm tests' from one without (2026-12-06: under TCG, where they run then).
set -euo pipefail
source "$(dirname "$0")/common.sh"
vms=$1 dir=$2 labels=$3 extra=$4
list() { (cd "$BUILD" && ctest -N "$@" | sed -n 's/^ *Test *#\([0-9]*\): \(.*\)$/\1 \2/p'); }
{
    [ -z "$labels" ] || list -L "$labels"
    [ -z "$extra" ] || list -R "$extra"
} | sort -n -u >"$dir/nested-tests.txt"
[ -s "$dir/nested-tests.txt" ] || exit 0
[ "$vms" -ge 1 ] || vms=1
costs="$BUILD/nested-costs.txt"
# A build tree's first run takes the costs measured when tests/nested-costs.txt was last written
# (scripts/test.sh's own, copied there by hand); later runs, this tree's own.
[ -e "$costs" ] || cp "$ROOT/tests/nested-costs.txt" "$costs" 2>/dev/null || : >"$costs"
# Longest first onto the least loaded VM (an unknown cost counts as the mean of the known ones).
awk -v vms="$vms" -v dir="$dir" -v costs="$costs" '
    BEGIN {  # "NAME SECONDS" lines; a name may have blanks in it
        while ((getline line < costs) > 0) {
            i = match(line, / [0-9.]+$/); if (!i) continue
            v = substr(line, i + 1) + 0; cost[substr(line, 1, i - 1)] = v; sum += v; k++
        }
    }
    { id[++n] = $1; name[n] = substr($0, length($1) + 2) }
    END {
        mean = k ? sum / k : 1
        for (i = 1; i <= n; i++) { c[i] = (name[i] in cost) ? cost[name[i]] : mean; order[i] = i }
        for (i = 2; i <= n; i++) for (j = i; j > 1 && c[order[j]] > c[order[j - 1]]; j--) { t = order[j]; order[j] = order[j - 1]; order[j - 1] = t }
        for (v = 1; v <= vms; v++) load[v] = 0
        for (i = 1; i <= n; i++) {
            t = order[i]; best = 1
            for (v = 2; v <= vms; v++) if (load[v] < load[best]) best = v
            load[best] += c[t]; shard[t] = best
        }
        for (i = 1; i <= n; i++) {
            s = dir "/shard-" shard[i]
            ids[shard[i]] = ids[shard[i]] "," id[i]
            print name[i] > (s "/tests.txt")
        }
        for (v = 1; v <= vms; v++) if (ids[v] != "") print "0,0,0" ids[v] > (dir "/shard-" v "/ids.txt")
    }' <(
    for v in $(seq "$vms"); do mkdir -p "$dir/shard-$v"; printf 'subdirs("%s")\n' "$BUILD" >"$dir/shard-$v/CTestTestfile.cmake"; done
    cat "$dir/nested-tests.txt")
