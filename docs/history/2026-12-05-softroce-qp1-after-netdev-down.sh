#!/bin/bash
# 2026-12-05 (session 50): SoftRoCE on Debian 6.1 with its netdev taken down: connection requests
# sent during the outage break the device's QP1 for good; every rping client after it times out.
# Run inside the SoftRoCE nested VM: scripts/softroce-run.sh bash docs/history/2026-12-05-softroce-qp1-after-netdev-down.sh
# Seen: "during outage rc=255" three times (UNREACHABLE -110), then "A: client after outage rc=124",
# "B: client after outage rc=124", "B: client 5s later rc=124". scripts/lib/scratch-wire.sh is the way round it.
ip link add dummy8 type dummy && ip addr add 10.99.8.1/24 dev dummy8 && ip link set dummy8 up && rdma link add rxe8 type rxe netdev dummy8
sleep 1
rping -s -a 10.99.8.1 -p 7777 -P > /tmp/rs.log 2>&1 &
sleep 1
echo "== A: REQs during an outage"
ip link set dummy8 down
for i in 1 2 3; do timeout 3 rping -c -a 10.99.8.1 -p 7777 -C 1 -v; echo " during outage rc=$?"; done
ip link set dummy8 up; sleep 1
timeout 8 rping -c -a 10.99.8.1 -p 7777 -C 2 -v; echo "A: client after outage rc=$?"
echo "== B: a connected client killed during an outage (DREQ while down)"
timeout 60 rping -c -a 10.99.8.1 -p 7777 -C 100000 -S 60000 > /tmp/rc1.log 2>&1 &
c1=$!
sleep 3
ip link set dummy8 down; sleep 0.5; kill $c1; sleep 2; ip link set dummy8 up; sleep 1
rdma res show cm_id
timeout 8 rping -c -a 10.99.8.1 -p 7777 -C 2 -v; echo "B: client after outage rc=$?"
sleep 5
timeout 8 rping -c -a 10.99.8.1 -p 7777 -C 2 -v; echo "B: client 5s later rc=$?"
rdma res show cm_id
rdma link delete rxe8; ip link del dummy8
