#!/usr/bin/env bash
# test_repo_hygiene.sh: what the documented commands write into the repository root is ignored by
# .gitignore, and no merge leftover (*.orig, conflict markers) is committed (tests/py/repo_hygiene.py).
set -u
cd "$(dirname "$0")/.."
exec /usr/bin/python3 tests/py/repo_hygiene.py "$PWD"
