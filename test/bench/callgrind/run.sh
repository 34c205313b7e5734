#!/usr/bin/env bash
# Instructions per request of an Express hello-world: bare, with tollgate's rateLimit (one
# rule), and with express-rate-limit (draft-8 and draft-7 headers), counted by valgrind's
# callgrind in the server process. Instruction counts do not depend on what else runs on
# the machine, so this is the figure to compare when the machine is shared and
# throughput is noise (docs/benchmarks.md, "Express").
#
#   pnpm build && test/bench/callgrind/run.sh [warmup=8000] [batch=2000] [batches=3]
#
# Each variant runs under valgrind in its own process, all in parallel (contention does
# not change the counts); node runs --single-threaded so that background compilation and
# GC threads do not add work that varies from run to run. After `warmup` uninstrumented requests (JIT, caches), it counts
# `batches` batches of `batch` requests and prints instructions per request per batch.
# Needs valgrind and callgrind_control; takes about 15 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")"
warmup=${1:-8000}
batch=${2:-2000}
batches=${3:-3}
out=$(mktemp -d)

measure() {
  local v=$1 port=$2
  valgrind --tool=callgrind --instr-atstart=no --smc-check=all-non-file \
    --callgrind-out-file="$out/cg.$v" node --single-threaded server.mjs "$v" "$port" > "$out/vg.$v.log" 2>&1 &
  for _ in $(seq 1 180); do grep -q ready "$out/vg.$v.log" && break; sleep 1; done
  # Not local: the EXIT trap reads it after the function returns.
  pid=$(grep -m1 -oE '^==[0-9]+==' "$out/vg.$v.log" | tr -d '=')
  # Whatever happens below, stop this variant's server.
  trap 'kill "$pid" 2> /dev/null || true' EXIT
  node client.mjs "$port" "$warmup"
  for _ in $(seq 1 "$batches"); do
    callgrind_control -i on "$pid" > /dev/null
    node client.mjs "$port" "$batch"
    callgrind_control -d "$pid" > /dev/null
    callgrind_control -i off "$pid" > /dev/null
  done
}

port=$((40000 + RANDOM % 10000))
for v in bare tollgate erl8 erl7; do
  (measure "$v" "$port") &
  port=$((port + 1))
done
wait

echo "| variant | instructions per request, per batch (thousands) |"
echo "| --- | --- |"
for v in bare tollgate erl8 erl7; do
  row=""
  for f in "$out"/cg."$v".*; do
    total=$(grep -E '^totals:' "$f" | awk '{print $2}')
    row="$row $((total / batch / 1000))k"
  done
  echo "| $v |$row |"
done
rm -rf "$out"
