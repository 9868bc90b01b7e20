#!/usr/bin/env bash
# Runs the benchmarks whose tables the docs show (docs/performance.md) and writes
# their --json output into docs/data/; run from anywhere, after `pip install '.[bench]'`.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=(
  "bench_core.py --quick"
  "bench_providers.py --quick --mb 100"
  "bench_requests.py --quick"
  "bench_control.py"
  "bench_observers.py"
  "bench_text.py"
  "bench_store.py"
  "bench_turn.py"
  "loop_instructions.py --loopback-only"
  "bench_syscalls.py"
  "bench_memory.py"
  "bench_import.py --rounds 7"
  "bench_mcp.py --quick"
)
for run in "${runs[@]}"; do
  read -r -a argv <<<"$run"
  name="${argv[0]%.py}"
  echo "== python bench/$run"
  python "bench/${argv[0]}" "${argv[@]:1}" --json "docs/data/$name.json"
done
