"""repo_hygiene.py: the repository stays clean when its own documentation is followed.
  - every path a command in README.md or docs/*.md writes into the repository root (--out, --save,
    --log, --events, --trace, -o, --mpi-log values and "> FILE" redirections, relative and
    top-level) is ignored by .gitignore, so `git status` stays clean after the README's commands;
  - no tracked file is a merge leftover: *.orig, *.rej, *.BASE/LOCAL/REMOTE.*, or a file with
    conflict markers (<<<<<<< / >>>>>>> at the start of a line).
Prints ok/FAIL lines for tests/run.sh. Needs git and a checkout (skips cleanly without one)."""
import os
import re
import shlex
import subprocess
import sys

REPO = sys.argv[1]
sys.path.insert(0, os.path.dirname(__file__))
fails = 0


def report(ok, name, why=""):
    global fails
    print(f"ok {name}" if ok else f"FAIL {name} ({why})")
    fails += not ok


def git(*args, **kw):
    return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, **kw)


if git("rev-parse", "--git-dir").returncode != 0:
    print("skip repo_hygiene (not a git checkout)")
    sys.exit(0)

WRITES = ("--out", "--save", "--log", "--events", "--trace", "-o", "--mpi-log")


def outputs(line):
    """the top-level names of the relative paths a command line writes"""
    try:
        toks = shlex.split(line.split(" #")[0])
    except ValueError:
        return set()
    outs = set()
    for i, t in enumerate(toks[:-1]):
        if t in WRITES or t == ">":
            outs.add(toks[i + 1])
    top = set()
    for o in outs:
        if o.startswith(("/", "$", "-", "~")) or o.upper() == o or "..." in o:
            continue  # absolute, a variable, a placeholder such as FILE.jsonl or DIR
        top.add(o.split("/")[0])
    return top


def blocks(path):
    """logical lines of the ```sh blocks"""
    out, lang, cur, pending = [], None, False, ""
    for n, line in enumerate(open(path), 1):
        line = line.rstrip("\n")
        if line.startswith("```"):
            cur, lang = (not cur), line[3:].strip()
            continue
        if not cur or lang != "sh":
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append((n, pending + line))
        pending = ""
    return out


docs = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(REPO, "docs")) if f.endswith(".md"))
seen = {}
for rel in docs:
    for n, line in blocks(os.path.join(REPO, rel)):
        for o in outputs(line):
            seen.setdefault(o, f"{rel}:{n}")
tracked_top = set(git("ls-files").stdout.split("\n"))
tracked_top = {p.split("/")[0] for p in tracked_top if p}
checked = 0
for name, where in sorted(seen.items()):
    if name in tracked_top or name in ("", "."):
        continue  # written inside something tracked (runs/demo is below an ignored /runs/ anyway)
    # a directory-only pattern (/data/) matches only a path given with its slash; a file pattern
    # matches either way: ask for both forms, one must be ignored
    ok = any(git("check-ignore", "-q", "--no-index", p).returncode == 0 for p in (name, name + "/"))
    checked += 1
    report(ok, f"doc_output_ignored {name}", f"{where} writes {name} into the repository root; add /{name} to .gitignore")
report(checked >= 4, "doc_outputs_found", f"only {checked} top-level outputs found in the docs' commands")

leftover = re.compile(r"(\.orig|\.rej|\.BASE\.[^/]*|\.LOCAL\.[^/]*|\.REMOTE\.[^/]*|_BACKUP_\d+[^/]*)$")
files = [f for f in git("ls-files").stdout.split("\n") if f]
bad = [f for f in files if leftover.search(f)]
report(not bad, "no_merge_leftover_files", ", ".join(bad[:5]))
marked = git("grep", "-l", "-I", "-E", "^(<<<<<<< |>>>>>>> )").stdout.split()
report(not marked, "no_conflict_markers", "conflict markers in " + ", ".join(marked[:5]))
sys.exit(1 if fails else 0)
