#!/usr/bin/python3
"""cli_help.py BIN SRC_DIR: every command's --help against what it accepts (tests/test_cli_help.sh).

1. The commands are found from `myriad --help` and each command's usage line (`<a|b>` groups and
   `myriad CMD SUB` lines name subcommands).
2. Listed => accepted: every flag in a command's option rows and usage lines is given to it
   (followed by an unknown flag, so that nothing runs); the reply must not be "unknown option
   'FLAG'". And the probe flag must be refused: an unknown flag is an error, not ignored.
3. Accepted => listed: every flag literal in the sources (option-table rows, strcmp(..., "--x"))
   is listed by some command's --help. A flag parsed outside the tables (by hand, as before the
   tables) and not added to a --help fails here.
4. Errors are one line starting "myriad: " (never "myriad: myriad:"), for a bad flag of each command.
Prints ok/FAIL lines."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from cli_help_flags import FLAG, help_flags  # noqa: E402

BIN, SRC = sys.argv[1], sys.argv[2]
PROBE = "--zz-not-an-option"
fails = 0


def report(ok, name, why=""):
    global fails
    print(("ok " if ok else "FAIL ") + name + ("" if ok else f" ({why})"))
    fails += not ok


def run(args, timeout=20):
    p = subprocess.run([BIN] + args, capture_output=True, text=True, timeout=timeout,
                       env=dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1"))
    return p.returncode, p.stdout, p.stderr


def subcommands(cmd, text):
    subs = []
    for line in text.splitlines()[:4]:
        m = re.search(r"myriad " + re.escape(cmd) + r" <([a-z|]+)>", line)
        if m:
            subs += m.group(1).split("|")
        m = re.search(r"myriad " + re.escape(cmd) + r" ([a-z]+) ", line)
        if m:
            subs.append(m.group(1))
    return list(dict.fromkeys(subs))


rc, top, _ = run(["--help"])
report(rc == 0, "top_level_help")
commands = [m.group(1) for m in re.finditer(r"^  ([a-z]+)\s", top.split("commands:")[1], re.M)]
report(len(commands) >= 9, "commands_found", commands)
rc, out, _ = run(["--version"])
report(rc == 0 and re.match(r"myriad \S+ \(commit \S+\)", out), "version", out)
rc, out, err = run(["nosuchcommand"])
report(rc != 0 and err.startswith("myriad: unknown command 'nosuchcommand'"), "unknown_command_refused", err[:200])

# (command words, help text)
cmds = []
for c in commands:
    rc, text, err = run([c, "--help"])
    report(rc == 0 and text.startswith("usage:"), f"help_{c}", err[:200])
    subs = subcommands(c, text)
    own = [f for f in help_flags(text) if f not in ("--version",)]
    if not subs or own:
        cmds.append(([c], text))
    for s in subs:
        rc, stext, err = run([c, s, "--help"])
        report(rc == 0 and stext.startswith("usage:"), f"help_{c}_{s}", err[:200])
        cmds.append(([c, s], stext))

listed_anywhere = set()
for words, text in cmds:
    name = "_".join(words)
    flags = help_flags(text)
    listed_anywhere |= flags
    bad = []
    for f in sorted(flags):
        rc, out, err = run(words + [f, PROBE] + (["x"] if words == ["run"] else []))
        if f"unknown option '{f}'" in err:
            bad.append(f)
    report(not bad and len(flags) > 0 or words == ["data", "info"], f"help_lists_only_accepted_flags_{name}", f"refused: {bad}")
    rc, out, err = run(words + [PROBE] + (["-n", "2", "--", "mesh"] if words == ["run"] else []))
    lines = [l for l in err.splitlines() if l.startswith("myriad")]
    report(rc != 0 and len(lines) >= 1 and lines[0].startswith("myriad: ") and "myriad: myriad" not in err
           and f"unknown option '{PROBE}'" in lines[0], f"unknown_flag_refused_in_one_line_{name}", err[:300])

# accepted => listed: flag literals in the sources
src_flags = {}
for root, _, files in os.walk(SRC):
    for fn in files:
        if not fn.endswith(".c"):
            continue
        path = os.path.join(root, fn)
        text = open(path).read()
        for m in re.finditer(r'(?:OPT_[A-Z0-9_]*\(|strcmp\([^;"]*|OPT_ALIAS\(.*?)"(--?[A-Za-z][A-Za-z0-9_-]*)"', text):
            src_flags.setdefault(m.group(1), path)
unlisted = sorted(f"{f} ({p})" for f, p in src_flags.items() if f not in listed_anywhere and f not in ("-h", "--help"))
report(len(src_flags) > 100 and not unlisted, "every_flag_in_the_sources_is_listed_by_a_help", f"{len(src_flags)} flags; unlisted: {unlisted}")
print(f"# {len(cmds)} commands, {len(listed_anywhere)} distinct flags listed, {len(src_flags)} flag literals in the sources")
sys.exit(1 if fails else 0)
