#!/usr/bin/python3
"""doc_commands.py REPO: the commands shown in README.md and docs/*.md, checked against the program
(tests/test_docs_commands.sh).

Runnable commands are the lines of ```sh blocks that start with bin/myriad, mpirun or make (a
trailing backslash continues a line, "# ..." is a comment): each runs, in order, in a scratch
"clone" of the project (a directory of links to bin/, build/, configs/, scripts/, src/, docs/,
bench/, tests/, README.md and Makefile, with ../shared beside it when the repository has one),
so the files the commands write (data/, out/, runs/...) land there. A command that exits non-zero
fails the test. Lines with "..." are synopses, not run. To keep the test short, one substitution
is made, said here and in each command's log line: --steps N (N > 2) runs 2 steps, and with it
--stop-after and --save-every become 1 and the validation at the end uses 2 batches (--eval-batches
2 unless given); `make demo` gets DEMO_STEPS=2 DEMO_EVAL_BATCHES=2 DEMO_SAMPLE=16; `bench comm`
times 2 iterations after 1 warm-up (-n 2 -w 1); the README's install and build lines are what built the program
under test and `make test` is this suite, so those three are not run. A command with --device cuda
is skipped ("no CUDA device") where the program refuses --device cuda (no GPU, or built without CUDA);
scripts/fetch_tokenizer.sh exiting 2 (npm or its registry unreachable) is a skip, and so is every
later command that reads what a skipped command would have written (its --out/--save/-o).

Every command shown anywhere (runnable lines, synopses in other blocks, and `inline` spans that
start with myriad or bin/myriad) must use only flags that its command's --help lists, and
commands in ```sh blocks must say bin/myriad (a bare `myriad` is not on PATH in the project root).
Prints ok/FAIL/skip lines and the time each command took."""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
REPO = os.path.abspath(sys.argv[1])
BIN = os.path.join(REPO, "bin/myriad")
NOT_RUN = {"bash scripts/install-deps.sh": "the build under test ran it",
           "make -j2": "the build under test", "make test": "this suite"}
fails = 0


def report(ok, name, why=""):
    global fails
    print(("ok " if ok else "FAIL ") + name + ("" if ok else f" ({why})"))
    fails += not ok


def helptext(words):
    p = subprocess.run([BIN] + words + ["--help"], capture_output=True, text=True, timeout=20)
    return p.stdout if p.returncode == 0 else ""


_help_cache = {}


def flags_of(words):
    key = tuple(words)
    if key not in _help_cache:
        import cli_help_flags
        _help_cache[key] = cli_help_flags.help_flags(helptext(words))
    return _help_cache[key]


SUBS = {"data": {"prepare", "info"}, "sim": {"validate", "goodput"}, "bench": {"comm", "sgemm", "calibrate"}, "sched": {"simulate", "place"}}
COMMANDS = {"train", "eval", "data", "sim", "plan", "bench", "mesh", "run", "sched", "tokenize", "detokenize", "doctor", "report"}


def check_flags(tokens, where):
    """tokens after 'myriad': returns a list of problems."""
    problems = []
    if not tokens:
        return problems
    cmd = tokens[0]
    if cmd in ("...", "<subcommand>") or cmd.startswith("<"):
        return problems  # a placeholder for the command
    if cmd.startswith("-"):
        return problems if cmd in ("--help", "--version") else [f"myriad {cmd}: not a command"]
    if "|" in cmd and all(c in COMMANDS for c in cmd.split("|")):
        cmd = cmd.split("|")[0]  # `myriad tokenize|detokenize --tokenizer T.json`: the flags of the first
    if cmd not in COMMANDS:
        return [f"'{cmd}' is not a myriad command"]
    words, rest = [cmd], tokens[1:]
    if cmd in SUBS and rest and not rest[0].startswith("-") and not rest[0].startswith("<"):
        alts = rest[0].split("|")
        if all(a in SUBS[cmd] for a in alts):
            words, rest = [cmd, alts[0]], rest[1:]
        elif cmd != "sim":
            return [f"myriad {cmd} {rest[0]}: not a subcommand"]
    if cmd == "run" and "--" in rest:  # the launched command has its own flags
        k = rest.index("--")
        problems += check_flags(rest[k + 1:], where)
        rest = rest[:k]
    known = flags_of(words)
    for t in rest:
        for part in re.split(r"[\[\]|()]", t):
            part = part.split("=")[0]
            if re.fullmatch(r"--?[A-Za-z][A-Za-z0-9_-]*", part) and part not in known and part not in ("--help", "-h"):
                problems.append(f"myriad {' '.join(words)} does not accept {part}")
    return problems


def myriad_tokens(cmdline):
    """The tokens after the myriad binary in a command line (None if it runs no myriad)."""
    try:
        toks = shlex.split(cmdline, comments=True)
    except ValueError:
        toks = cmdline.split()
    for i, t in enumerate(toks):
        if t in ("bin/myriad", "myriad", "./bin/myriad"):
            return toks[i + 1:]
    return None


def blocks(path):
    """(lang, first line number, [(line number, logical line)])"""
    out, cur, lang, start, pending, pstart = [], None, "", 0, "", 0
    for n, line in enumerate(open(path), 1):
        line = line.rstrip("\n")
        if line.startswith("```"):
            if cur is None:
                cur, lang, start = [], line[3:].strip(), n
            else:
                out.append((lang, start, cur))
                cur = None
            continue
        if cur is None:
            continue
        if not pending:
            pstart = n
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        cur.append((pstart, pending + line))
        pending = ""
    return out


def is_command(line):
    s = line.strip()
    return re.match(r"(bin/myriad|myriad|mpirun|make|bash)\b", s) and not re.match(r"myriad( run)?:", s)


def substitute(cmd):
    notes = []
    def steps(m):
        if int(m.group(1)) > 2:
            notes.append(f"--steps {m.group(1)} -> 2")
            return "--steps 2"
        return m.group(0)
    cmd = re.sub(r"--steps (\d+)", steps, cmd)
    if notes:
        for flag in ("--stop-after", "--save-every"):
            cmd, k = re.subn(flag + r" (\d+)", flag + " 1", cmd)
            if k:
                notes.append(f"{flag} -> 1")
        if "--eval-batches" not in cmd:
            cmd = re.sub(r"(\btrain )", r"\1--eval-batches 2 ", cmd, count=1)
            notes.append("--eval-batches 2")
    if re.search(r"\bbench comm\b", cmd):
        cmd, k = re.subn(r" -n \d+", " -n 2", cmd)
        cmd, k2 = re.subn(r" -w \d+", " -w 1", cmd)
        if k or k2:
            notes.append("-n 2 -w 1")
    if re.search(r"\bmake demo\b", cmd):
        cmd = "DEMO_STEPS=2 DEMO_EVAL_BATCHES=2 DEMO_SAMPLE=16 " + cmd
        notes.append("DEMO_STEPS=2 DEMO_EVAL_BATCHES=2 DEMO_SAMPLE=16")
    return cmd, notes


_cuda = None


def cuda_usable():
    """Whether `--device cuda` can run here: asked once, of the program itself (a machine without a
    GPU, or a build without CUDA, answers with its one-line "--device cuda: ..." refusal)."""
    global _cuda
    if _cuda is None:
        fx = os.path.join(REPO, "tests/fixtures/gpt2-tiny")
        p = subprocess.run([os.path.join(REPO, "bin/myriad"), "train", "--init", fx, "--data", fx + "/tokens.bin",
                            "--batch", "2", "--seq", "8", "--steps", "1", "--device", "cuda", "--threads", "1"],
                           capture_output=True, text=True, errors="replace", timeout=120)
        _cuda = not (p.returncode != 0 and "--device cuda: " in p.stderr)
    return _cuda


def make_clone():
    top = tempfile.mkdtemp(prefix="myriad-docs-")
    clone = os.path.join(top, "clone")
    os.mkdir(clone)
    for f in ("bin", "build", "configs", "scripts", "src", "docs", "bench", "tests", "README.md", "Makefile"):
        if os.path.exists(os.path.join(REPO, f)):
            os.symlink(os.path.join(REPO, f), os.path.join(clone, f))
    shared = os.path.join(os.path.dirname(REPO), "shared")
    if os.path.isdir(shared):
        os.symlink(shared, os.path.join(top, "shared"))
    return top, clone


docs = [os.path.join(REPO, "README.md")] + sorted(
    os.path.join(REPO, "docs", f) for f in os.listdir(os.path.join(REPO, "docs")) if f.endswith(".md"))
top, clone = make_clone()
env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_WAIT_POLICY="passive",
           MYRIAD_SHM_DIR=os.path.join(top, "shm"))
ran = checked = 0
missing = set()  # what skipped commands would have written: commands that read it are skipped too


def outputs_of(cmd):
    """the paths a command writes: --out/--save/-o values, and fetch_tokenizer.sh's OUT"""
    toks = shlex.split(cmd.split("|")[0])
    outs = {toks[i + 1] for i, t in enumerate(toks[:-1]) if t in ("--out", "--save", "-o")}
    if "scripts/fetch_tokenizer.sh" in toks:
        i = toks.index("scripts/fetch_tokenizer.sh")
        outs.update(toks[i + 2:i + 3])
    return {o.rstrip("/") for o in outs}


t_all = time.time()
try:
    for path in docs:
        rel = os.path.relpath(path, REPO)
        text = open(path).read()
        for lang, start, lines in blocks(path):
            for n, line in lines:
                if not is_command(line):
                    continue
                name = f"{rel}:{n}"
                toks = myriad_tokens(line)
                if toks is not None:
                    probs = check_flags(toks, name)
                    checked += 1
                    report(not probs, f"doc_flags {name}", "; ".join(probs))
                if lang != "sh":
                    continue
                cmd = line.split(" #")[0].strip()
                if re.match(r"myriad\b", cmd):
                    report(False, f"doc_runs {name}", "not runnable from the project root: write bin/myriad")
                    continue
                if "..." in cmd:
                    continue  # a synopsis
                skip = next((why for pre, why in NOT_RUN.items() if cmd.startswith(pre) and "make demo" not in cmd[len(pre):]), None)
                parts = [p.strip() for p in cmd.split("&&")]
                if len(parts) > 1:  # "install && make && make demo": run only the parts this test runs
                    parts = [p for p in parts if p not in NOT_RUN]
                    skip = None if parts else skip
                    cmd = " && ".join(parts)
                if skip:
                    print(f"skip doc_runs {name} ({skip})")
                    continue
                if "--device cuda" in cmd and not cuda_usable():
                    print(f"skip doc_runs {name} (no CUDA device)")
                    continue
                if "../shared" in cmd and not os.path.isdir(os.path.join(top, "shared")):
                    print(f"skip doc_runs {name} (../shared not present)")
                    continue
                need = next((m for m in missing if re.search(r"(^|[ '=])" + re.escape(m), cmd)), None)
                if need:
                    print(f"skip doc_runs {name} (needs {need}, which a skipped command makes)")
                    missing.update(outputs_of(cmd))
                    continue
                run_cmd, notes = substitute(cmd)
                t0 = time.time()
                try:
                    p = subprocess.run(["bash", "-c", run_cmd], cwd=clone, env=env, capture_output=True, text=True,
                                       errors="replace", timeout=300)
                    rc, err = p.returncode, (p.stderr or p.stdout)[-600:]
                except subprocess.TimeoutExpired:
                    rc, err = 124, "timed out after 300 s"
                if rc == 2 and "scripts/fetch_tokenizer.sh" in cmd:  # npm or its registry unreachable
                    print(f"skip doc_runs {name} ({err.strip().splitlines()[-1] if err.strip() else 'npm unavailable'})")
                    missing.update(outputs_of(cmd))
                    continue
                ran += 1
                report(rc == 0, f"doc_runs {name}", f"exit {rc}: {err}")
                print(f"# {name}: {time.time() - t0:.1f} s: {cmd[:110]}" + (f" [{', '.join(notes)}]" if notes else ""))
        # inline code spans: `myriad ...` / `bin/myriad ...`
        for m in re.finditer(r"`((?:bin/)?myriad [^`]+)`", text):
            n = text.count("\n", 0, m.start()) + 1
            if re.match(r"(?:bin/)?myriad( [a-z]+)?:", m.group(1)):
                continue  # a message the program prints, not a command
            toks = myriad_tokens(m.group(1))
            probs = check_flags(toks or [], f"{rel}:{n}")
            checked += 1
            if probs:
                report(False, f"doc_flags {rel}:{n} (inline)", "; ".join(probs))
    report(ran >= 10 and checked >= 40, "doc_commands_found", f"ran {ran}, checked {checked}")
    print(f"# {ran} commands run, {checked} checked against --help, {time.time() - t_all:.0f} s")
finally:
    shutil.rmtree(top, ignore_errors=True)
sys.exit(1 if fails else 0)
