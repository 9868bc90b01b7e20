#!/usr/bin/env bash
# Runs the benchmarks whose tables the docs show (docs/performance.md) and writes
# their --json output into docs/data/; run from anywhere, after `pip install '.[bench]'`.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=(
  "bench_providers.py --quick --mb 100"
  "bench_requests.py --quick"
  "bench_control.py"
  "bench_observers.py"
  "bench_text.py"
  "bench_store.py"
)
for run in "${runs[@]}"; do
  read -r -a argv <<<"$run"
  name="${argv[0]%.py}"
  echo "== python bench/$run"
  python "bench/${argv[0]}" "${argv[@]:1}" --json "docs/data/$name.json"
done
