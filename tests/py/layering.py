"""layering.py: within each folder of src/, no two files call each other, directly or round a
longer loop. A file's calls are read from its object file (nm: the symbols it needs that another
object of the same folder defines, functions and data alike), so the check sees what the linker
sees, not what the headers declare. A loop is reported with the symbols that make each edge.
Cross-folder calls are not checked here (folders are subsystems; ARCHITECTURE.md orders them).
First a self-check: two object files built to call each other must be reported as a loop.
Prints ok/FAIL lines for tests/run.sh; skips cleanly when the build or nm is missing."""
import collections
import glob
import os
import shutil
import subprocess
import sys
import tempfile

REPO = sys.argv[1]
fails = 0


def report(ok, name, why=""):
    global fails
    print(f"ok {name}" if ok else f"FAIL {name} ({why})")
    fails += not ok


def symbols(paths):
    """path -> (defined, needed) external symbols, from one nm call over every object"""
    out = subprocess.run(["nm", "-A", *paths], capture_output=True, text=True, check=True).stdout
    syms = {p: (set(), set()) for p in paths}
    for line in out.splitlines():
        path, sep, rest = line.partition(":")  # "PATH:ADDR TYPE NAME" (object paths hold no colon)
        if not sep or path not in syms:
            continue
        f = rest.split()
        if len(f) == 3 and f[1] in "TDBRCGSV":
            syms[path][0].add(f[2])
        elif len(f) == 2 and f[0] == "U":
            syms[path][1].add(f[1])
    return syms


def graph_of(objs, syms):
    """file -> {file it needs: [symbols]} over objects of one folder"""
    owner = {}
    for name, path in objs.items():
        for s in syms[path][0]:
            owner[s] = name
    g = collections.defaultdict(dict)
    for name, path in objs.items():
        for s in sorted(syms[path][1]):
            o = owner.get(s)
            if o and o != name:
                g[name].setdefault(o, []).append(s)
    return g


def loops(g, nodes):
    """strongly connected components with more than one file (Tarjan, iterative)"""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(g.get(root, {}))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g.get(w, {})))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def describe(g, comp):
    edges = []
    for a in comp:
        for b, syms in sorted(g.get(a, {}).items()):
            if b in comp:
                more = f" +{len(syms) - 3}" if len(syms) > 3 else ""
                edges.append(f"{a} -> {b}: {', '.join(syms[:3])}{more}")
    return "; ".join(edges)


if not shutil.which("nm"):
    print("skip layering (no nm: apt install binutils)")
    sys.exit(0)
cc = shutil.which("cc") or shutil.which("gcc")

# self-check: a.c and b.c call each other, c.c only calls a.c
if cc:
    with tempfile.TemporaryDirectory() as d:
        src = {"a": "int b(void); int c_seen; int a(void) { return b(); }",
               "b": "int a(void); int b(void) { return a() + 1; }",
               "c": "int a(void); extern int c_seen; int c(void) { return a() + c_seen; }"}
        objs = {}
        for k, text in src.items():
            with open(os.path.join(d, k + ".c"), "w") as f:
                f.write(text + "\n")
            subprocess.run([cc, "-c", os.path.join(d, k + ".c"), "-o", os.path.join(d, k + ".o")], check=True)
            objs[k + ".c"] = os.path.join(d, k + ".o")
        g = graph_of(objs, symbols(list(objs.values())))
        found = loops(g, objs)
        report(found == [["a.c", "b.c"]] and g["c.c"] == {"a.c": ["a", "c_seen"]}, "layering_detects_a_loop",
               f"found {found}, edges {dict(g)}")
else:
    print("skip layering_detects_a_loop (no C compiler)")

obj_root = os.path.join(REPO, "build", "obj")
if not os.path.isdir(obj_root):
    print("skip layering (no build/obj: run make first)")
    sys.exit(1 if fails else 0)
folders = collections.defaultdict(dict)
for o in glob.glob(os.path.join(obj_root, "**", "*.o"), recursive=True):
    rel = os.path.relpath(o, obj_root)[:-2]
    for ext in (".c", ".cu"):  # only objects of sources that exist (not a stale one, not the CUDA unity file)
        if os.path.exists(os.path.join(REPO, "src", rel + ext)):
            folders[os.path.dirname(rel)][os.path.basename(rel) + ext] = o
if not folders:
    print("skip layering (build/obj holds no object of src/: run make first)")
    sys.exit(1 if fails else 0)
every = symbols([o for objs in folders.values() for o in objs.values()])
for folder in sorted(folders):
    objs = folders[folder]
    g = graph_of(objs, every)
    found = loops(g, objs)
    report(not found, f"layering_src/{folder}_{len(objs)}_files",
           " | ".join(describe(g, c) for c in found) + ": move what both need below both, or merge them")

# the folders themselves (docs/ARCHITECTURE.md, "Layers": top calls down, never up), a subfolder
# counted with its parent (kernels/cpu is kernels)
top = {}
for folder, objs in folders.items():
    for name, o in objs.items():
        top[folder.split("/")[0] + "/" + folder + "/" + name] = o
g = graph_of(top, every)
fg = collections.defaultdict(dict)
for a, outs in g.items():
    for b, syms in outs.items():
        fa, fb = a.split("/")[0], b.split("/")[0]
        if fa != fb:
            fg[fa].setdefault(fb, []).extend(f"{s} ({a.split('/', 1)[1]})" for s in syms)
found = loops(fg, {k.split("/")[0] for k in top})
report(not found, f"layering_folders_{len({k.split('/')[0] for k in top})}",
       " | ".join(describe(fg, c) for c in found) + ": the lower folder must not call the upper one")
sys.exit(1 if fails else 0)
