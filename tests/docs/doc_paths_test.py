#!/usr/bin/env python3
"""doc_paths_test.py ROOT DOC...: every file a document names exists.

A name counts where it looks like a file of ours (ends in .cc, .h, .sh, .py, .md, .cmake, .txt,
.x or .toml, braces expanded: proto/wire.{h,cc}). It is looked for from the checkout's root and
from the folders a document's names are written relative to (vmm/, vmm/migration/, vmmd/, the
RDMA plugin's, tests/); a bare file name, anywhere in the tree. Prints each missing name with its
line, and fails if there is one."""
import glob
import os
import re
import sys

BASES = ["", "vmm", "vmm/migration", "vmmd", "plugins/rdma-migrate", "tests", "scripts", "docs", "include"]
NAME = re.compile(r"(?<![\w./*-])((?:\.\./)?[\w./{},*-]*[\w*]\.(?:cc|h|sh|py|md|cmake|txt|x|toml)(?:\{[\w,]+\})?)(?![\w/])")
# Names of other projects' files (libvirt's, QEMU's, the kernel's), of the documents beside the
# checkout (../shared: design.md, style.md), or of what a run writes.
FOREIGN = re.compile(r"^(src/|migration/rdma|migration/|linux/|virnet|remote_protocol|qemu_|rdma\.c|"
                     r"virterror\.h$|(\.\./)?shared/|design\.md$|style\.md$|build/|/|CMakeCache|ninja)")


def expand(name):
    m = re.search(r"\{([^{}]*)\}", name)
    if not m:
        return [name]
    return [e for part in m.group(1).split(",") for e in expand(name[:m.start()] + part + name[m.end():])]


def main():
    root, docs = sys.argv[1], sys.argv[2:]
    every = set()
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in (".git", "build") and not x.startswith("build")]
        every.update(files)
    missing = []
    for doc in docs:
        with open(os.path.join(root, doc), encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                for name in NAME.findall(line):
                    if FOREIGN.match(name):
                        continue
                    for one in expand(name):
                        if "*" in one:
                            found = any(glob.glob(os.path.join(root, base, one)) for base in BASES)
                        elif "/" not in one:
                            found = one in every
                        else:
                            found = any(os.path.exists(os.path.join(root, base, one)) for base in BASES)
                        if not found:
                            missing.append(f"{doc}:{number}: {one}")
    for m in missing:
        print(f"names a file that does not exist: {m}")
    print(f"{len(missing)} missing" if missing else f"every file {', '.join(docs)} names exists")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
