#!/usr/bin/env python3
"""gpu_needs.py: what building and running myriad takes from this Debian machine beyond the C/C++
toolchain, derived from the build itself (never listed by hand), as the manifest that
scripts/gpu_deps.sh packs for the offline GPU machine and scripts/gpu_check.sh checks and, in its
rehearsal, hides.

Sources, all from the build:
  headers   `make build-headers`: every header the C, emulation and CUDA sources include (-M)
  link      `make link-inputs`: every file the link line (CC, LDFLAGS, LDLIBS) resolves to
  tools     the Makefile's CC (an MPI wrapper: its --showme flags), mpirun (the tests' and the
            training phase's launcher) and make
  sonames   the NEEDED closure (readelf -d) of every shared library linked and of every ELF file
            of every package that provides a need, to a fixed point (so Open MPI's plugins and the
            libraries they load are in)
  data      Architecture: all packages that those runtime packages depend on (Open MPI's help
            texts and its MCA defaults, openmpi-common)
Each file is mapped to the Debian package that owns it (dpkg's file lists, following symlinks
such as /etc/alternatives until an owned path). Packages are classed:
  toolchain  the Depends closure of gcc, g++ and libc6-dev: the GPU machine has its own compiler
             and C library; never packed, never hidden, not listed
  base       the Depends closure of the Priority required/important packages (grep's PCRE2,
             GnuTLS), and toolchain packages a packed link input points into (zlib1g-dev's
             libz.so -> zlib1g's libz.so.1.2.13): packed, but at run time the machine's own copy
             is taken when its loader has the soname; the rehearsal leaves them visible (this
             machine's own tools need them)
  packed     everything else: packed, and hidden in the rehearsal
The CUDA toolkit's files (under the Makefile's CUDA_HOME) are the GPU machine's own: skipped.

Output (stdout), one record a line, fields separated by single spaces:
  need header NAME ROOT PKG         the header included as <NAME> is ROOT/NAME, owned by PKG
  need link FILE PATH PKG           the link line takes PATH (owned, maybe a symlink into another
                                    package: its target is a `need file` line)
  need file PATH PKG                a file a symlink of another need resolves to
  need soname SONAME PATH PKG BY    the loader needs SONAME (PATH, in PKG) for BY
  need tool NAME PATH PKG           the program NAME is PATH
  need data PKG PATH                a package of data files (PATH: one of its files)
  cc-libs FLAGS...                  libraries the MPI compiler wrapper adds to a link (-lmpi)
  package PKG VERSION ARCH CLASS    a package to pack, CLASS packed|base
  unresolved SONAME BY              a NEEDED nobody here provides (a plugin for absent hardware)
Usage: python3 scripts/gpu_needs.py >MANIFEST   (from the repository root, after the build's deps
are installed: scripts/install-deps.sh)
"""
import glob
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def die(msg):
    print(f"gpu_needs: {msg}", file=sys.stderr)
    sys.exit(1)


def run(cmd, what):
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        die(f"{what} failed ({' '.join(cmd)}): {tail}")
    return p.stdout


def make_var(name):
    return run(["make", "-s", f"print-{name}"], f"make print-{name}").strip()


# ---------------------------------------------------------------- dpkg's view of this machine
def load_owners():
    """path -> package from dpkg's file lists (the /lib, /bin forms of merged /usr kept as listed)"""
    owners = {}
    files = {}
    for lst in glob.glob("/var/lib/dpkg/info/*.list"):
        pkg = os.path.basename(lst)[:-5].split(":")[0]
        paths = []
        with open(lst, errors="replace") as f:
            for line in f:
                p = line.rstrip("\n")
                if p and p != "/.":
                    owners.setdefault(p, pkg)
                    paths.append(p)
        files[pkg] = paths
    return owners, files


OWNERS, FILES = load_owners()
if not OWNERS:
    die("no dpkg file lists under /var/lib/dpkg/info: run this on the Debian build machine")
MERGED = ("/lib/", "/lib64/", "/bin/", "/sbin/")


def canonical(p):
    """the /usr form of a merged-/usr path (/lib/x -> /usr/lib/x) when / is merged"""
    for m in MERGED:
        if p.startswith(m) and os.path.islink(m.rstrip("/")):
            return "/usr" + p
    return p


def owner(p):
    alts = [p, canonical(p)]
    if any(p.startswith("/usr" + m) for m in MERGED):
        alts.append(p[4:])  # dpkg lists some merged-/usr files in their /lib form
    return next((OWNERS[q] for q in alts if q in OWNERS), None)


def chain(path):
    """[(path, owning package or None)] from PATH along its symlinks, ending at the first path
    dpkg owns that is not a symlink, or at a file nobody owns"""
    out = []
    p = os.path.normpath(path)
    for _ in range(40):
        pkg = owner(p)
        out.append((canonical(p), pkg))
        if not os.path.islink(p):
            return out
        p = os.path.normpath(os.path.join(os.path.dirname(p), os.readlink(p)))
    die(f"symlink loop at {path}")


def closure(pkgs):
    if not pkgs:
        return set()
    out = run(["apt-cache", "depends", "--recurse", "--installed", "--no-recommends", "--no-suggests",
               "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances"] + sorted(pkgs),
              "apt-cache depends")
    return {l.strip().split(":")[0] for l in out.splitlines() if l and not l.startswith(" ") and not l.startswith("<")}


status = run(["dpkg-query", "-W", "-f", "${Package} ${Version} ${Architecture} ${Priority} ${db:Status-Abbrev}\n"],
             "dpkg-query")
INSTALLED = {}
for line in status.splitlines():
    f = line.split()
    if len(f) >= 5 and f[4].startswith("ii"):
        INSTALLED[f[0]] = {"version": f[1], "arch": f[2], "priority": f[3]}
TOOLCHAIN = closure({p for p in ("gcc", "g++", "libc6-dev") if p in INSTALLED})
BASE = closure({p for p, i in INSTALLED.items() if i["priority"] in ("required", "important")}) - TOOLCHAIN

cuda_home = make_var("CUDA_HOME")
CUDA = os.path.realpath(cuda_home) if cuda_home else None


def toolkit(p):
    return CUDA is not None and (os.path.realpath(p) + "/").startswith(CUDA + "/")


needs = []       # output lines
need_pkgs = {}   # package -> first need
seen = set()


def add(kind, *fields, pkg):
    key = (kind,) + fields[:1]
    if key in seen:
        return
    seen.add(key)
    needs.append(" ".join(("need", kind) + tuple(fields)))
    need_pkgs.setdefault(pkg, key)


LINK_TARGETS = set()  # toolchain packages whose files a packed link input points at (zlib1g)


def owned_hops(path, what, link=False):
    """the owned paths along PATH's symlinks: the first is the need, the others (a symlink's
    target in another package, say libz.so -> libz.so.1.2.13) must travel too; for a link input
    (LINK) even a toolchain package's target, since the linker follows the link in the prefix"""
    hops = [(p, pkg) for p, pkg in chain(path) if pkg]
    if not hops:
        die(f"{path} ({what}) belongs to no Debian package: install it from one, or build without it")
    for p, pkg in hops[1:]:
        if pkg not in TOOLCHAIN or (link and hops[0][1] not in TOOLCHAIN):
            add("file", p, pkg, pkg=pkg)
            if pkg in TOOLCHAIN:
                LINK_TARGETS.add(pkg)
    return hops[0]


# ---------------------------------------------------------------- tools
cc = make_var("CC")
cc_libs = []
tools = [("make", shutil.which("make"))]
cc_path = shutil.which(cc.split()[0])
if not cc_path:
    die(f"the Makefile's CC ({cc}) is not on the PATH")
tools.insert(0, ("cc", cc_path))
show = subprocess.run([cc_path, "--showme:link"], capture_output=True, text=True)
if show.returncode == 0:  # an MPI wrapper: its own libraries, and the MPI launcher
    cc_libs = [a for a in show.stdout.split() if a.startswith("-l")]
    tools.append(("mpirun", shutil.which("mpirun")))
for name, path in tools:
    if not path:
        die(f"{name} is not on the PATH")
    p, pkg = owned_hops(path, name)
    if pkg not in TOOLCHAIN:
        add("tool", name, p, pkg, pkg=pkg)

# ---------------------------------------------------------------- headers
def search_dirs():
    dirs = []
    for lang in ("c", "c++"):
        err = subprocess.run(["gcc", "-x", lang, "-E", "-v", "/dev/null"], capture_output=True, text=True).stderr
        on = False
        for line in err.splitlines():
            if line.startswith("#include <...> search starts here"):
                on = True
            elif line.startswith("End of search list"):
                on = False
            elif on:
                dirs.append(os.path.normpath(line.strip()))
    flags = make_var("CFLAGS").split()
    if show.returncode == 0:
        flags += subprocess.run([cc_path, "--showme:compile"], capture_output=True, text=True).stdout.split()
    dirs += [os.path.normpath(f[2:]) for f in flags if f.startswith("-I/")]
    return sorted(set(dirs), key=len, reverse=True)


DIRS = search_dirs()
for h in run(["make", "-s", "build-headers"], "make build-headers").split():
    h = os.path.normpath(h)
    if toolkit(h):
        continue
    name = next((h[len(d) + 1:] for d in DIRS if h.startswith(d + "/")), os.path.basename(h))
    p, pkg = owned_hops(h, "a header")
    if pkg in TOOLCHAIN:
        continue
    if not p.endswith("/" + name):  # reached through a link of another name: include the file by its own
        die(f"header {h} (included as <{name}>) is {p} in {pkg}: a name the prefix cannot give; add an -I for it")
    add("header", name, p[: -len(name) - 1], pkg, pkg=pkg)

# ---------------------------------------------------------------- link inputs
shared = []
for line in run(["make", "-s", "link-inputs"], "make link-inputs").splitlines():
    m = re.search(r"\((/[^)]+)\)\s*$", line)  # "-lfoo (/path)" in some ld versions
    path = m.group(1) if m else line.strip()
    if not path.startswith("/") or path.startswith("/tmp/") or toolkit(path):
        continue
    path = os.path.normpath(path)
    p, pkg = owned_hops(path, "a link input", link=True)
    if pkg in TOOLCHAIN:
        continue
    add("link", os.path.basename(path), p, pkg, pkg=pkg)
    if ".so" in os.path.basename(path):
        shared.append(os.path.realpath(path))

# ---------------------------------------------------------------- sonames: the NEEDED closure
def is_elf(p, want64=False):
    """an ELF file (WANT64: a 64-bit x86-64 one, what this build's programs can load)"""
    try:
        with open(p, "rb") as f:
            head = f.read(20)
    except OSError:
        return False
    if head[:4] != b"\x7fELF":
        return False
    return not want64 or (head[4] == 2 and int.from_bytes(head[18:20], "little") == 62)


def needed(paths):
    """{path: [soname, ...]} from one readelf call per batch"""
    out = {}
    for i in range(0, len(paths), 200):
        batch = paths[i:i + 200]
        text = subprocess.run(["readelf", "-dW"] + batch, capture_output=True, text=True).stdout
        cur = batch[0] if len(batch) == 1 else None
        for line in text.splitlines():
            if line.startswith("File: "):
                cur = line[6:].strip()
            m = re.search(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", line)
            if m and cur:
                out.setdefault(cur, []).append(m.group(1))
    return out


ldcache = {}
for line in run(["/sbin/ldconfig", "-p"], "ldconfig -p").splitlines()[1:]:
    m = re.match(r"\s*(\S+) \(([^)]*)\) => (\S+)", line)
    if m and "x86-64" in m.group(2):
        ldcache.setdefault(m.group(1), m.group(3))
by_name = {}
for p in OWNERS:
    by_name.setdefault(os.path.basename(p), []).append(p)


def resolve(soname, needer):
    """the file the loader would take for SONAME: beside the needer (Open MPI's plugins), from
    the loader's cache, else a 64-bit file of that name in a package (one already needed first)"""
    here = os.path.join(os.path.dirname(needer), soname)
    if is_elf(here, want64=True):
        return here
    if soname in ldcache:
        return ldcache[soname]
    cands = [p for p in by_name.get(soname, []) if is_elf(p, want64=True)]
    cands.sort(key=lambda p: (OWNERS.get(p) not in need_pkgs, len(p)))
    return cands[0] if cands else None


def soname_of(path):
    text = subprocess.run(["readelf", "-dW", path], capture_output=True, text=True).stdout
    m = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", text)
    return m.group(1) if m else None


# what the programs themselves load: the SONAME of each shared library the link line takes
for real in shared:
    s = soname_of(real)
    r = s and resolve(s, real)
    if r:
        p, pkg = owned_hops(r, f"{s}, the link line's")
        if pkg not in TOOLCHAIN or pkg in LINK_TARGETS:  # zlib: the machine's copy, else the prefix's
            add("soname", s, p, pkg, "bin/myriad", pkg=pkg)

unresolved = []
done_files, done_pkgs = set(), set()
work = list(shared)
while True:
    for pkg in sorted(set(need_pkgs) - done_pkgs):  # every ELF file of every package that provides a need
        done_pkgs.add(pkg)
        for p in FILES.get(pkg, []):
            if os.path.isfile(p) and not os.path.islink(p) and is_elf(p):
                work.append(p)
    work = [p for p in dict.fromkeys(work) if p not in done_files]
    if not work:
        break
    done_files.update(work)
    for path, sonames in needed(work).items():
        for s in sonames:
            r = resolve(s, path)
            if r is None:
                unresolved.append(f"unresolved {s} {canonical(path)}")
                continue
            p, pkg = owned_hops(r, f"{s}, needed by {path}")
            if pkg not in TOOLCHAIN:
                add("soname", s, p, pkg, canonical(path), pkg=pkg)
    work = []

# ---------------------------------------------------------------- data packages of the runtime ones
runtime = {l.split()[4] for l in needs if l.split()[1] in ("soname", "tool")}
for pkg in sorted(runtime):
    deps = run(["dpkg-query", "-W", "-f", "${Depends}", pkg], "dpkg-query").split(",")
    for d in deps:
        name = d.strip().split()[0].split(":")[0] if d.strip() else ""
        alts = [a.strip().split()[0] for a in d.split("|")]
        if len(alts) > 1 or name not in INSTALLED or name in TOOLCHAIN or name in BASE:
            continue
        if INSTALLED[name]["arch"] == "all" and name not in need_pkgs:
            files = [p for p in FILES.get(name, []) if os.path.isfile(p) and "/doc/" not in p]
            rep = next((p for p in files if p.startswith("/etc/")), files[0] if files else None)
            if rep:
                add("data", name, canonical(rep), pkg=name)

# ---------------------------------------------------------------- out
print(f"# gpu_needs.py manifest: derived from the build of {ROOT} on {os.uname().nodename}")
for l in needs:
    print(l)
if cc_libs:
    print("cc-libs " + " ".join(cc_libs))
for pkg in sorted(need_pkgs):
    i = INSTALLED.get(pkg)
    if not i:
        die(f"{pkg} owns a need but is not installed")
    print(f"package {pkg} {i['version']} {i['arch']} {'base' if pkg in BASE or pkg in LINK_TARGETS else 'packed'}")
for u in sorted(set(unresolved)):
    print(u)
