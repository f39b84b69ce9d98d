#!/usr/bin/env bash
# Lint: no JSON that reaches vmm from outside (a monitor client, a QMP peer, a guest's text) is
# read with a throwing or undefined accessor. nlohmann's get<>(), at(), value(), get_to() and
# get_ref<>() throw on a wrong type, parse() throws by default, dump() throws on bytes that are
# not UTF-8, and a const operator[] is undefined for a missing key. The code that holds JSON reads
# it through vmm/monitor/client/json_access.h instead; this test fails naming any line that does not.
# Usage: no_throwing_json_test.sh SOURCE_DIR
set -euo pipefail
cd "$1"
files=$(grep -rl --include='*.cc' --include='*.h' -e 'nlohmann' -e 'Json' vmm vmmd plugins tools | grep -v '^vmm/monitor/client/json_access\.')
[ -n "$files" ] || { echo "no file uses JSON: the lint looks in the wrong place"; exit 1; }
# shellcheck disable=SC2086
bad=$(grep -nE '(\.|->)(get<|at\(|value\(|get_to\(|get_ref<|dump\()|(J|j)son::parse\(|\b(a|args|request|req|reply|r|j|e|m|c|b)\["' $files |
      grep -vE '^[^:]+:[0-9]+:\s*//' |
      grep -vE '\b(j|reply|out|event|cmd|result)\["[^"]*"\] = ' || true)
if [ -n "$bad" ]; then
    echo "throwing or unchecked JSON accessors (use vmm/monitor/client/json_access.h):"
    echo "$bad"
    exit 1
fi
echo "ok: $(echo "$files" | wc -l) files hold JSON, none reads it with a throwing accessor"
