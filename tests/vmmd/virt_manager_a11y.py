"""Reads virt-manager's window through the accessibility tree (AT-SPI, as screen readers do):
waits until its list of virtual machines shows DOMAIN in STATE, then prints that row.
   virt_manager_a11y.py DOMAIN STATE SECONDS"""
import sys
import time

import pyatspi


def texts(node, out):
    try:
        if node.name:
            out.append((node.getRoleName(), node.name))
        for i in range(node.childCount):
            texts(node.getChildAtIndex(i), out)
    except Exception:  # a node that went away while read: read again next round
        pass
    return out


def vm_list_rows():
    desktop = pyatspi.Registry.getDesktop(0)
    for i in range(desktop.childCount):
        app = desktop.getChildAtIndex(i)
        if app is not None and app.name and "virt-manager" in app.name:
            return [name for role, name in texts(app, []) if role == "table cell"]
    return None


def main():
    domain, state, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    deadline, rows = time.time() + seconds, None
    while time.time() < deadline:
        rows = vm_list_rows()
        for row in rows or []:
            if row.split("\n") == [domain, state]:
                print("row:", row.replace("\n", " / "))
                return 0
        time.sleep(0.5)
    print("virt-manager's list never showed %s %s; its cells: %r" % (domain, state, rows))
    return 1


sys.exit(main())
