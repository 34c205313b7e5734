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
# Each variant runs under valgrind in its own process, JOBS (2) at a time (contention does
# not change the counts). After `warmup` uninstrumented requests (JIT, caches), it counts
# `batches` batches of `batch` requests and prints instructions per request per batch.
#
# Threads: by default node runs with its background threads (TurboFan, concurrent and
# parallel GC) and callgrind counts each thread apart (--separate-threads=yes); the figure
# is the main thread's, where the event loop answers requests, with every thread's in a
# second column and the main thread's median over the batches last. Compilation landing in
# a batch or not moved whole-process counts by 20-45k per request on Express; the main
# thread's settle within about 2k from the second batch. THREADS=single runs node
# --single-threaded (everything on one thread, one column), as the figures before
# 2026-12-01 were measured. Needs valgrind and callgrind_control.
set -euo pipefail
cd "$(dirname "$0")"
warmup=${1:-8000}
batch=${2:-2000}
batches=${3:-3}
jobs=${JOBS:-2}
threads=${THREADS:-separate}
if [[ $threads == single ]]; then
  vgflags=() nodeflags=(--single-threaded)
else
  vgflags=(--separate-threads=yes) nodeflags=()
fi
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
  valgrind --tool=callgrind --instr-atstart=no --smc-check=all-non-file "${vgflags[@]}" \
    --callgrind-out-file="$out/cg.$i" node "${nodeflags[@]}" --predictable-gc-schedule server.mjs "$v" > "$out/vg.$i.log" 2>&1 &
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

# Instructions per request in one dump file (or the sum of several), to a hundred.
per() {
  local total
  total=$(cat "$@" | awk '/^totals:/ { t += $2 } END { printf "%d", t }')
  local n=$((total / batch / 100))
  echo "$((n / 10)).$((n % 10))"
}

if [[ $threads == single ]]; then
  echo "| variant | instructions per request, per batch (thousands) |"
  echo "| --- | --- |"
else
  echo "| variant | main thread, per batch (k instructions per request) | all threads, per batch | main thread, median |"
  echo "| --- | --- | --- | ---: |"
fi
for i in "${!list[@]}"; do
  row="" all="" mains=()
  # In batch order (a glob lists cg.N.10 before cg.N.2).
  for b in $(seq 1 "$batches"); do
    if [[ $threads == single ]]; then
      [[ -f "$out/cg.$i.$b" ]] || continue
      row="$row $(per "$out/cg.$i.$b")k"
    else
      # Thread 1 is node's main thread; the others are V8's and libuv's.
      [[ -f "$out/cg.$i.$b-01" ]] || continue
      m=$(per "$out/cg.$i.$b-01")
      mains+=("$m")
      row="$row $m"
      all="$all $(per "$out/cg.$i.$b"-*)"
    fi
  done
  if [[ $threads == single ]]; then
    echo "| ${list[$i]} |$row |"
  else
    median=$(printf '%s\n' "${mains[@]}" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
    echo "| ${list[$i]} |$row |$all | ${median}k |"
  fi
done
rm -rf "$out"
