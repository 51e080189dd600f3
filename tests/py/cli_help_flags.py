"""cli_help_flags.py: the flags a --help text lists (its option rows and usage lines); shared by
cli_help.py and doc_commands.py."""
import re

FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][A-Za-z0-9_-]*)")


def help_flags(text):
    """Flags of option rows ("  --name ..." / "  -n, --name ...") and of usage lines."""
    flags = set()
    in_usage = False
    for line in text.splitlines():
        if line.startswith("usage:"):
            in_usage = True
        elif in_usage and not re.match(r"\s+(\[|myriad )", line):
            in_usage = False
        m = re.match(r"  (--?[A-Za-z][A-Za-z0-9_-]*(?:, --?[A-Za-z][A-Za-z0-9_-]*)?)(?=\s|$)", line)
        if m:
            flags.update(f.strip() for f in m.group(1).split(","))
        if in_usage:
            # a usage line may show another command's flags after its name (myriad run ... -- train ...)
            own = line.split(" -- ")[0]
            flags.update(FLAG.findall(own))
    return {f for f in flags if f not in ("-h", "--help")}
