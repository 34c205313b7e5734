#!/usr/bin/env bash
# From clone to first page: clones a repository (default: this one) into a fresh temporary
# folder, runs the README's demo steps there and prints how long each took:
# `pnpm install --frozen-lockfile`, then `pnpm start` until the playground answers
# (first start on the fresh clone), stopped, and started again (second start).
#   bash scripts/clone-to-page.sh [repository or path] [branch] [port]
set -euo pipefail
src=${1:-$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)}
branch=${2:-$(git -C "$src" rev-parse --abbrev-ref HEAD)}
port=${3:-4917}
dir=$(mktemp -d "${TMPDIR:-/tmp}/tollgate-clone-XXXXXX")
trap 'rm -rf "$dir"' EXIT
ms() { echo $(( $(date +%s%N) / 1000000 )); }
secs() { printf '%d.%03d s' $(( $1 / 1000 )) $(( $1 % 1000 )); }

git clone -q --branch "$branch" "$src" "$dir/repo"
cd "$dir/repo"
t0=$(ms); pnpm install --frozen-lockfile > "$dir/install.log" 2>&1; t1=$(ms)
echo "pnpm install --frozen-lockfile: $(secs $((t1 - t0)))"
for run in first second; do
  s=$(ms)
  PORT=$port setsid pnpm start > "$dir/start-$run.log" 2>&1 &
  pid=$!
  until curl -sf -o /dev/null "http://127.0.0.1:$port/"; do
    kill -0 "$pid" 2>/dev/null || { cat "$dir/start-$run.log"; exit 1; }
    sleep 0.1
  done
  e=$(ms)
  echo "$run pnpm start until the page answers: $(secs $((e - s)))"
  kill -- "-$pid"
  wait "$pid" 2>/dev/null || true
done
grep -E '^(built|[0-9]+ built)' "$dir/start-first.log" || true
