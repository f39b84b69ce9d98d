// A go-libvirt client (DigitalOcean's pure-Go libvirt protocol, with an XDR codec of its own, not
// libvirt's) driving two vmmd as a Go program would: connect, version, define, start, list,
// state, save, restore, lifecycle events, a live peer-to-peer migration with typed parameters
// and its job statistics while it runs and once completed, then the guest at the destination,
// destroy, undefine. Prints "go-libvirt ok" or says what failed and exits 1.
//
//	golibvirt SOCKET DEST-SOCKET DOMAIN.xml SAVE-FILE PORT
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	libvirt "github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket/dialers"
)

func check(what string, err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "go-libvirt: %s: %v\n", what, err)
		os.Exit(1)
	}
}

func connect(sock string) *libvirt.Libvirt {
	l := libvirt.NewWithDialer(dialers.NewLocal(dialers.WithSocket(sock), dialers.WithLocalTimeout(10*time.Second)))
	check("connect to "+sock, l.ConnectToURI(libvirt.ConnectURI("vmm:///system")))
	return l
}

func expectState(l *libvirt.Libvirt, dom libvirt.Domain, want libvirt.DomainState, when string) {
	state, reason, err := l.DomainGetState(dom, 0)
	check("state "+when, err)
	if state != int32(want) {
		check("state "+when, fmt.Errorf("state %d (reason %d), want %d", state, reason, want))
	}
}

func param(ps []libvirt.TypedParam, name string) (interface{}, bool) {
	for _, p := range ps {
		if p.Field == name {
			return p.Value.I, true
		}
	}
	return nil, false
}

// migrate moves dom live to the destination's vmmd, peer to peer, at 2 MiB/s (so that its job
// statistics can be read while it runs), and samples them meanwhile: how many bytes had moved.
func migrate(l *libvirt.Libvirt, dom libvirt.Domain, dest string, port string) uint64 {
	done := make(chan error, 1)
	go func() {
		params := []libvirt.TypedParam{
			{Field: "migrate_uri", Value: *libvirt.NewTypedParamValueString("tcp://127.0.0.1:" + port)},
			{Field: "bandwidth", Value: *libvirt.NewTypedParamValueUllong(2)},
		}
		_, err := l.DomainMigratePerform3Params(dom, libvirt.OptString{"vmm+unix:///system?socket=" + dest}, params, nil,
			libvirt.MigrateLive|libvirt.MigratePeer2peer)
		done <- err
	}()
	var moved uint64
	for {
		select {
		case err := <-done:
			check("migrate --p2p", err)
			return moved
		case <-time.After(50 * time.Millisecond):
		}
		kind, ps, err := l.DomainGetJobStats(dom, 0)
		check("job stats during the migration", err)
		if v, ok := param(ps, "memory_processed"); ok && kind == 2 { // VIR_DOMAIN_JOB_UNBOUNDED
			moved = v.(uint64)
		}
	}
}

func main() {
	if len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: golibvirt SOCKET DEST-SOCKET DOMAIN.xml SAVE-FILE PORT")
		os.Exit(2)
	}
	sock, dest, xmlPath, savePath, port := os.Args[1], os.Args[2], os.Args[3], os.Args[4], os.Args[5]
	l := connect(sock)
	defer l.Disconnect()
	version, err := l.ConnectGetLibVersion()
	check("library version", err)
	xml, err := os.ReadFile(xmlPath)
	check("reading the domain XML", err)
	dom, err := l.DomainDefineXML(string(xml))
	check("define", err)
	check("start", l.DomainCreate(dom))
	expectState(l, dom, libvirt.DomainRunning, "after start")
	domains, _, err := l.ConnectListAllDomains(1, libvirt.ConnectListDomainsActive)
	check("list", err)
	if len(domains) != 1 || domains[0].Name != dom.Name {
		check("list", fmt.Errorf("active domains %v, want only %q", domains, dom.Name))
	}
	check("save", l.DomainSave(dom, savePath))
	expectState(l, dom, libvirt.DomainShutoff, "after save")
	check("restore", l.DomainRestore(savePath))
	expectState(l, dom, libvirt.DomainRunning, "after restore")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events, err := l.LifecycleEvents(ctx)
	check("lifecycle events", err)
	moved := migrate(l, dom, dest, port)
	if moved == 0 {
		check("job stats during the migration", fmt.Errorf("no memory_processed seen while it ran"))
	}
	for migrated := false; !migrated; {
		select {
		case e := <-events:
			migrated = e.Dom.Name == dom.Name && e.Event == 5 && e.Detail == 3 // Stopped, Migrated
		case <-time.After(30 * time.Second):
			check("events", fmt.Errorf("no Stopped Migrated event for %q", dom.Name))
		}
	}
	kind, _, err := l.DomainGetJobStats(dom, 1) // VIR_DOMAIN_JOB_STATS_COMPLETED
	check("completed job stats", err)
	if kind != 3 { // VIR_DOMAIN_JOB_COMPLETED
		check("completed job stats", fmt.Errorf("job type %d, want completed", kind))
	}
	expectState(l, dom, libvirt.DomainShutoff, "after the migration, at the source")

	d := connect(dest)
	defer d.Disconnect()
	there, err := d.DomainLookupByName(dom.Name)
	check("the domain at the destination", err)
	expectState(d, there, libvirt.DomainRunning, "at the destination")
	check("destroy at the destination", d.DomainDestroy(there))
	check("undefine", l.DomainUndefine(dom))
	fmt.Printf("go-libvirt ok (library version %d; %d bytes seen moving during the migration)\n", version, moved)
}
