#!/usr/bin/env bash
# The documentation: builds the site with every warning an error (broken links,
# references, docstrings), then runs and checks every code block of docs/ and the
# README. Run from anywhere; installs the docs extra first.
set -euo pipefail
cd "$(dirname "$0")/.."

export NO_MKDOCS_2_WARNING=1
python -m pip install -q -e ".[docs]"
python -m mkdocs build --strict --site-dir "${NAVI_DOCS_SITE:-$(mktemp -d)}"
python -m pytest -q -p no:cacheprovider tests/test_docs.py
