#!/usr/bin/env sh
# Regenerates the charts of docs/algorithms.md with the tollgate CLI.
# Run from the repository root after `pnpm build`:  sh docs/img/charts.sh
set -eu
t="node packages/cli/bin/tollgate.js"
$t simulate -a fixed-window -r 10/s -p boundary --rows 0 --svg docs/img/fixed-window-boundary.svg
$t compare -a fixed-window,sliding-log,sliding-window -r 10/s -p boundary --svg docs/img/boundary-compare.svg
for a in sliding-log sliding-window token-bucket leaky-queue sliding-buckets; do
  $t simulate -a "$a" -r 10/s -p "burst 80 over 2s" --rows 0 --svg "docs/img/burst-80-$a.svg"
done
$t compare -r 10/s -p "burst 80 over 2s" --svg docs/img/burst-80-compare.svg
$t compare -a fixed-window,sliding-buckets,sliding-log -r 10/s --buckets 4 -p "burst 10 at 249" -p "burst 10 at 1000" -i 752ms --svg docs/img/buckets-edge-compare.svg
$t rate-timeline --rate 2MB/s --burst 16MB --link 10MB/s --duration 6s --svg docs/img/limit-rate-textbook.svg
