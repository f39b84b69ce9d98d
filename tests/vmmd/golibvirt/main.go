// A go-libvirt client (DigitalOcean's pure-Go libvirt protocol, with an XDR codec of its own, not
// libvirt's) driving vmmd as a Go program would: connect, version, define, start, list, state,
// save, restore, destroy, undefine. Prints "go-libvirt ok" or says what failed and exits 1.
//
//	golibvirt SOCKET DOMAIN.xml SAVE-FILE
package main

import (
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

func expectState(l *libvirt.Libvirt, dom libvirt.Domain, want libvirt.DomainState, when string) {
	state, reason, err := l.DomainGetState(dom, 0)
	check("state "+when, err)
	if state != int32(want) {
		check("state "+when, fmt.Errorf("state %d (reason %d), want %d", state, reason, want))
	}
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: golibvirt SOCKET DOMAIN.xml SAVE-FILE")
		os.Exit(2)
	}
	sock, xmlPath, savePath := os.Args[1], os.Args[2], os.Args[3]
	l := libvirt.NewWithDialer(dialers.NewLocal(dialers.WithSocket(sock), dialers.WithLocalTimeout(10*time.Second)))
	check("connect", l.ConnectToURI(libvirt.ConnectURI("vmm:///system")))
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
	check("destroy", l.DomainDestroy(dom))
	check("undefine", l.DomainUndefine(dom))
	fmt.Printf("go-libvirt ok (library version %d)\n", version)
}
