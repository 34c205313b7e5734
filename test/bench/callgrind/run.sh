#!/usr/bin/env bash
# Instructions per request of a hello-world on Express, Fastify and node:http: bare, with
# tollgate (one rule and the four-rule stack, memory store) and with the peer of each
# framework (express-rate-limit draft-8, @fastify/rate-limit), counted by valgrind's
# callgrind in the server process. Instruction counts do not depend on what else runs on
# the machine, so this is the figure to compare when the machine is shared and
# throughput is noise (docs/benchmarks.md, "Instructions per request").
#
#   pnpm build && test/bench/callgrind/run.sh [warmup=8000] [batch=2000] [batches=3]
#
# VARIANTS='express bare|fastify bare' (names of ../http/variants.mjs, separated by |)
# measures a subset; the default is every variant the variants file has of the list below.
# Each variant runs under valgrind in its own process, two at a time (contention does
# not change the counts); node runs --single-threaded so that background compilation and
# GC threads do not add work that varies from run to run. After `warmup` uninstrumented
# requests (JIT, caches), it counts `batches` batches of `batch` requests and prints
# instructions per request per batch. Needs valgrind and callgrind_control.
set -euo pipefail
cd "$(dirname "$0")"
warmup=${1:-8000}
batch=${2:-2000}
batches=${3:-3}
jobs=${JOBS:-2}
out=$(mktemp -d)
default='express bare|express tollgate memory 1 rule|express tollgate memory 4 rules|express express-rate-limit memory|fastify bare|fastify tollgate memory 1 rule|fastify tollgate memory 4 rules|fastify @fastify/rate-limit memory|node bare|node tollgate memory 1 rule|node tollgate memory 4 rules'
IFS='|' read -r -a wanted <<< "${VARIANTS:-$default}"
known=$(node -e "import('../http/variants.mjs').then((m) => console.log(Object.keys(m.variants).join('\n')))")
list=()
for v in "${wanted[@]}"; do
  if grep -qxF "$v" <<< "$known"; then list+=("$v"); fi
done

measure() {
  local i=$1 v=$2
  valgrind --tool=callgrind --instr-atstart=no --smc-check=all-non-file \
    --callgrind-out-file="$out/cg.$i" node --single-threaded --predictable-gc-schedule server.mjs "$v" > "$out/vg.$i.log" 2>&1 &
  for _ in $(seq 1 300); do grep -q '^ready' "$out/vg.$i.log" && break; sleep 1; done
  local port
  port=$(grep -m1 -oE '^ready [0-9]+' "$out/vg.$i.log" | cut -d' ' -f2)
  # Not local: the EXIT trap reads it after the function returns.
  pid=$(grep -m1 -oE '^==[0-9]+==' "$out/vg.$i.log" | tr -d '=')
  # Whatever happens below, stop this variant's server.
  trap 'kill "$pid" 2> /dev/null || true' EXIT
  node client.mjs "$port" "$warmup"
  for _ in $(seq 1 "$batches"); do
    callgrind_control -i on "$pid" > /dev/null
    node client.mjs "$port" "$batch"
    callgrind_control -d "$pid" > /dev/null
    callgrind_control -i off "$pid" > /dev/null
  done
  kill "$pid" 2> /dev/null || true
}

for i in "${!list[@]}"; do
  (measure "$i" "${list[$i]}") &
  if (( (i + 1) % jobs == 0 )); then wait; fi
done
wait

echo "| variant | instructions per request, per batch (thousands) |"
echo "| --- | --- |"
for i in "${!list[@]}"; do
  row=""
  # In batch order (a glob lists cg.N.10 before cg.N.2), to a hundred instructions.
  for b in $(seq 1 "$batches"); do
    f="$out/cg.$i.$b"
    [[ -f "$f" ]] || continue
    total=$(grep -E '^totals:' "$f" | awk '{print $2}')
    per=$((total / batch / 100))
    row="$row $((per / 10)).$((per % 10))k"
  done
  echo "| ${list[$i]} |$row |"
done
rm -rf "$out"
