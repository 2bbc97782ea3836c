#!/usr/bin/env bash
# A representative slice of the tests, run again with a CPU hog beside them: two busy loops (as
# many as this machine has cores, at least two), each a `bash` spinning at normal priority, the
# way a contributor's laptop is busy with a browser and a build. The slice is the tests that
# once went red only on a busy machine (a recording waited for the PSS readings it needs, statsd
# paced to what it reads, an alert's events on a recording), and tests of each kind that wait on
# a live agent: sampling, the workers, serve's routes and history, statsd end to end, alerts,
# groups. They must pass: a test waits for the state it needs with a bound, never a fixed sleep,
# and asserts behaviour, never a time. The hog is stopped by its pids whatever happens.
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "-- compiles: nothing (runs the dev build's test binaries under a CPU hog)"
source scripts/lib/cargo.sh
ensure_dev_proctor

hogs=()
stop_hogs() {
  for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${hogs[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop_hogs EXIT
loops=$(nproc)
[[ $loops -ge 2 ]] || loops=2
for _ in $(seq "$loops"); do
  bash -c 'while :; do :; done' &
  hogs+=($!)
done
echo "-- $loops busy loops (pids ${hogs[*]}); load $(cut -d' ' -f1-3 /proc/loadavg)"

status=0
slice() {
  local package=$1 target=$2
  shift 2
  echo "-- $package $target: $*"
  run_tests "$package" "$target" "$@" || status=1
}
slice proctor-cli it \
  share::from_a_recording_the_agents_readings_make_the_rounds \
  statsd_attack::hostile_keys_are_refused_or_capped_and_memory_stays_bounded \
  alerts::report_shows_the_alerts_that_fired_in_its_range \
  alerts::a_webhook_hears_each_transition_once_under_flapping_with_the_rate_limit_on \
  groups::a_wrapper_whose_children_live_less_than_a_sample_still_shows_their_cpu \
  snapshot_count_streams_json_lines_with_rates \
  serve_answers_and_stops_on_sigterm
slice proctor-sampler it \
  reads_pss_of_a_child_and_the_worker_refreshes_it \
  cmdline_worker_fills_command_lines \
  churn_processes_exiting_during_scans_are_skipped_not_errors
slice proctor-http it \
  history_before_the_ring_comes_from_the_store_in_time_order_without_a_duplicate_at_the_seam \
  every_route_answers_json_from_the_snapshot
slice proctor-statsd it \
  udp_tcp_and_unix_lines_reach_graphite \
  self_metrics_count_what_was_refused
echo "-- load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
