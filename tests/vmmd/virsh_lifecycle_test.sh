#!/usr/bin/env bash
# Stock virsh and libvirt's Python binding run vmm domains through vmmd (label libvirt): start,
# suspend, resume, shutdown, destroy, a transient domain (create), lifecycle events (virsh event),
# a read-only connection refused a destroy, a failed start reported with the vmm's own words, a
# restart of vmmd that keeps the running domain, and a vmm killed behind vmmd's back noticed as
# crashed; autostart, once per boot of the host.
#   virsh_lifecycle_test.sh BUILD_DIR
set -uo pipefail
build=$1
. "$(dirname "$0")/lib.sh"
[ -w /dev/kvm ] || { echo "SKIP: needs /dev/kvm"; exit 77; }
start_vmmd "$build"
state_is() { [ "$(v domstate "$1" --reason | head -1)" = "$2" ]; }

pattern_domain "$dir/demo.xml"
out=$(v define "$dir/demo.xml") || fail "define: $out"
v dumpxml demo >"$dir/demo-uuid.xml" || fail "dumpxml: $(cat "$dir/demo-uuid.xml")"

# Lifecycle events: a listener, known to be registered once a redefinition reaches it.
stdbuf -oL virsh -c "$uri" event --domain demo --event lifecycle --loop --timeout 120 >"$dir/events" 2>&1 &
listener=$!
registered() { v define "$dir/demo-uuid.xml" >/dev/null; grep -q "Defined Updated" "$dir/events"; }
wait_until 20 registered || fail "virsh event never heard a definition: $(cat "$dir/events")"
echo "ok: virsh event is listening"

out=$(v start demo) || fail "start: $out"
expect "start" "$out" "Domain 'demo' started"
out=$(v list) || fail "list: $out"
expect "list shows it running with an id" "$out" "1[[:space:]]+demo[[:space:]]+running"
expect "domstate --reason" "$(v domstate demo --reason)" "running \(booted\)"
expect "domid" "$(v domid demo)" "^1$"
expect "dominfo" "$(v dominfo demo)" "State: +running"
pgrep -f -- "--qmp unix:$dir/state/run/" >/dev/null || fail "no vmm process runs"
echo "ok: one vmm process runs the domain"
# CPU time: the vmm's own, from the kernel (dominfo prints the line only when it is not 0), and
# it grows while the guest runs.
cpu() { v dominfo demo | sed -n 's/^CPU time: *\([0-9.]*\)s/\1/p'; }
first=$(cpu)
[ -n "$first" ] || fail "dominfo has no CPU time: $(v dominfo demo)"
grows() { awk -v a="$first" -v b="$(cpu)" 'BEGIN { exit !(b > a) }'; }
wait_until 30 grows || fail "the CPU time did not grow from ${first}s: $(v dominfo demo)"
echo "ok: dominfo's CPU time is the vmm's and grows (${first}s, then $(cpu)s)"
expect "dumpxml of a running domain carries its id" "$(v dumpxml demo | head -1)" "id='1'"
[ -z "$(v dumpxml --inactive demo | head -1 | grep "id=")" ] || fail "dumpxml --inactive carries an id"
echo "ok: dumpxml --inactive carries no id"

out=$(virsh -r -c "$uri" destroy demo 2>&1) && fail "a read-only connection destroyed a domain: $out"
expect "read-only: no destroy" "$out" "read only|read-only"
out=$(v suspend demo) || fail "suspend: $out"
expect "domstate after suspend" "$(v domstate demo --reason)" "paused \(user\)"
out=$(v resume demo) || fail "resume: $out"
expect "domstate after resume" "$(v domstate demo --reason)" "running \(unpaused\)"
out=$(v resume demo) && fail "resume of a running domain: $out"
expect "resume of a running domain is refused" "$out" "already running"
out=$(v shutdown demo) || fail "shutdown: $out"
wait_until 20 state_is demo "shut off (shutdown)" || fail "shutdown: $(v domstate demo --reason)"
echo "ok: shutdown leaves it shut off (shutdown)"
out=$(v start demo) || fail "start again: $out"
out=$(v destroy demo) || fail "destroy: $out"
expect "destroy is done when it returns" "$(v domstate demo --reason)" "shut off \(destroyed\)"
out=$(v destroy demo) && fail "destroy of a domain that does not run: $out"
expect "destroy of a shut-off domain is refused" "$out" "not running"

seen() { [ "$(grep "event 'lifecycle'" "$dir/events" | grep -vc Defined)" -ge 6 ]; }
wait_until 20 seen || fail "events: $(cat "$dir/events")"
got=$(grep -o "for domain 'demo': .*" "$dir/events" | grep -v Defined | tr '\n' ',')
want="for domain 'demo': Started Booted,for domain 'demo': Suspended Paused,for domain 'demo': Resumed Unpaused,"
want+="for domain 'demo': Stopped Shutdown,for domain 'demo': Started Booted,for domain 'demo': Stopped Destroyed,"
[ "$got" = "$want" ] || fail "lifecycle events: got '$got', want '$want'"
echo "ok: virsh event saw start, suspend, resume, shutdown, start, destroy"
kill "$listener" 2>/dev/null

# A transient domain, and a start that fails.
sed -e 's/>demo</>brief</' "$dir/demo.xml" >"$dir/brief.xml"
out=$(v create "$dir/brief.xml" --paused) || fail "create: $out"
expect "create --paused" "$(v domstate brief --reason)" "paused \(user\)"
expect "a created domain is transient" "$(v dominfo brief)" "Persistent: +no"
out=$(v destroy brief) || fail "destroy brief: $out"
out=$(v list --all --name)
grep -q brief <<<"$out" && fail "a transient domain is left after destroy: $out"
echo "ok: a destroyed transient domain is gone"
sed -e 's/>demo</>broken</' -e 's#<kernel>pattern</kernel>#<kernel>/nonexistent.elf</kernel>#' "$dir/demo.xml" >"$dir/broken.xml"
out=$(v create "$dir/broken.xml") && fail "a domain with no payload started: $out"
expect "a failed start says what vmm said" "$out" "payload file /nonexistent.elf does not exist"
# A guest that crashes a second after it starts (a CPU exception in the payload: its vmm exits
# with 128 + the vector); start returns first, as its QMP socket answers at once.
sed -e 's/>demo</>faulty</' -e 's#<cmdline>[^<]*</cmdline>##' \
    -e 's#<kernel>pattern</kernel>#<kernel>idle</kernel><cmdline>tick_ms=250 fault=4</cmdline>#' \
    "$dir/demo.xml" >"$dir/faulty.xml"
out=$(v define "$dir/faulty.xml") || fail "define faulty: $out"
out=$(v start faulty) || fail "start faulty: $out"
wait_until 60 state_is faulty "shut off (crashed)" || fail "a crashed guest: $(v domstate faulty --reason)"
echo "ok: a guest's CPU exception leaves its domain shut off (crashed)"
out=$(v undefine faulty) || fail "undefine faulty: $out"

# Restart vmmd under a running domain; then kill its vmm behind vmmd's back.
out=$(v start demo) || fail "start before the restart: $out"
id=$(v domid demo | head -1)
vmm_pid=$(pgrep -f -- "--qmp unix:$dir/state/run/")
stop_vmmd
[ ! -e "$sock" ] || fail "vmmd left its socket behind: SIGTERM did not stop it cleanly"
kill -0 "$vmm_pid" 2>/dev/null || fail "the vmm ended with vmmd"
start_vmmd "$build"
expect "after a restart of vmmd the domain still runs" "$(v domstate demo --reason)" "running \(booted\)"
expect "with the same id" "$(v domid demo)" "^$id$"
out=$(v suspend demo) || fail "suspend after the restart: $out"
echo "ok: the restarted vmmd drives the domain"
kill -KILL "$vmm_pid"
wait_until 10 state_is demo "shut off (crashed)" || fail "a killed vmm: $(v domstate demo --reason)"
echo "ok: a vmm killed behind vmmd's back is noticed as crashed"

if /usr/bin/python3 -c 'import libvirt' 2>/dev/null; then
    out=$(timeout 60 /usr/bin/python3 - "$uri" "$dir/brief.xml" <<'PY' 2>&1
import sys, threading, libvirt
libvirt.virEventRegisterDefaultImpl()
threading.Thread(target=lambda: [libvirt.virEventRunDefaultImpl() for _ in iter(int, 1)], daemon=True).start()
c = libvirt.open(sys.argv[1])
seen = []
done = threading.Event()
def lifecycle(conn, dom, event, detail, opaque):
    seen.append((dom.name(), event, detail))
    if event == libvirt.VIR_DOMAIN_EVENT_STOPPED:
        done.set()
c.domainEventRegisterAny(None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, lifecycle, None)
d = c.createXML(open(sys.argv[2]).read(), 0)
assert d.isActive() == 1 and d.isPersistent() == 0 and d.ID() > 0
d.suspend()
assert d.state()[0] == libvirt.VIR_DOMAIN_PAUSED, d.state()
d.resume()
assert d.info()[0] == libvirt.VIR_DOMAIN_RUNNING, d.info()
d.destroy()
assert done.wait(20), seen
assert [e for _, e, _ in seen] == [libvirt.VIR_DOMAIN_EVENT_STARTED, libvirt.VIR_DOMAIN_EVENT_SUSPENDED,
                                  libvirt.VIR_DOMAIN_EVENT_RESUMED, libvirt.VIR_DOMAIN_EVENT_STOPPED], seen
print("python ok", seen)
PY
) || fail "python: $out"
    expect "libvirt-python: createXML, suspend, resume, destroy, events" "$out" "python ok"
else
    echo "note: /usr/bin/python3 has no libvirt module (apt-get install python3-libvirt): the Python part is skipped"
fi

# Autostart: marked (a persistent domain only), listed by the filter, started when vmmd starts in
# a new boot of the host, and not when vmmd restarts in the same one (the domain was stopped
# meanwhile: it stays so). A new boot is what removing the marker of the last one stands for.
cat >"$dir/auto.xml" <<'XML'
<domain type='vmm'>
  <name>auto</name>
  <memory unit='MiB'>16</memory>
  <os><type>hvm</type><kernel>idle</kernel></os>
</domain>
XML
out=$(v define "$dir/auto.xml") || fail "define auto: $out"
out=$(v autostart auto) || fail "autostart: $out"
expect "autostart marks it" "$(v dominfo auto)" "Autostart: +enable"
expect "list --autostart shows it" "$(v list --all --autostart)" " auto "
out=$(v list --all --no-autostart) || fail "list --no-autostart: $out"
grep -q " auto " <<<"$out" && fail "list --no-autostart shows an autostart domain: $out"
echo "ok: list --no-autostart leaves it out"
stop_vmmd
start_vmmd "$build"
out=$(v domstate auto) || fail "domstate auto: $out"
expect "a restart in the same boot starts nothing" "$out" "shut off"
rm "$dir/state/autostarted"  # a new boot
stop_vmmd
start_vmmd "$build"
expect "a new boot starts it" "$(v domstate auto)" "running"
expect "the log says so" "$(cat "$dir/log")" "domain 'auto' autostarted"
out=$(v destroy auto) || fail "destroy auto: $out"
out=$(v autostart --disable auto) || fail "autostart --disable: $out"
expect "autostart --disable" "$(v dominfo auto)" "Autostart: +disable"
out=$(v autostart auto) || fail "autostart again: $out"
out=$(v undefine auto) || fail "undefine auto: $out"
[ -z "$(ls "$dir/state/autostart")" ] || fail "undefine left an autostart mark: $(ls "$dir/state/autostart")"
echo "ok: undefine drops its autostart mark"
sed 's/<name>auto</<name>auto2</' "$dir/auto.xml" >"$dir/auto2.xml"
out=$(v create "$dir/auto2.xml") || fail "create auto2: $out"
out=$(v autostart auto2) && fail "a transient domain was marked autostart: $out"
expect "a transient domain cannot autostart" "$out" "cannot set autostart for transient domain"
out=$(v destroy auto2) || fail "destroy auto2: $out"
out=$(virsh -r -c "$uri" autostart demo 2>&1) && fail "a read-only connection set autostart: $out"
echo "ok: a read-only connection cannot set autostart"
