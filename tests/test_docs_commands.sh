#!/usr/bin/env bash
# test_docs_commands.sh: every command shown in README.md and docs/*.md runs (in a scratch clone of
# the project, in document order, --steps shortened as tests/py/doc_commands.py documents) and
# uses only flags its command's --help lists.
set -u
cd "$(dirname "$0")/.."
exec /usr/bin/python3 tests/py/doc_commands.py "$PWD"
