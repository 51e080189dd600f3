#!/usr/bin/env bash
# test_layering.sh: within each folder of src/, no two files call each other (directly or round a
# loop), read from the built object files (tests/py/layering.py).
set -u
cd "$(dirname "$0")/.."
exec /usr/bin/python3 tests/py/layering.py "$PWD"
