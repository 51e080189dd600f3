#!/usr/bin/env bash
# test_cli_help.sh: every command's --help lists exactly the flags it accepts (tests/py/cli_help.py):
# each listed flag is accepted, an unknown one refused in one "myriad: " line, and every flag
# literal in the sources appears in some --help (a flag parsed outside the option tables fails).
set -u
cd "$(dirname "$0")/.."
exec /usr/bin/python3 tests/py/cli_help.py "$PWD/bin/myriad" src
