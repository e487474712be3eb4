#!/usr/bin/env bash
# Fleet throughput on one host with two GPUs and no network: a local nats-server with JetStream,
# `miden-gpu serve` workers, and `fleet_bench` submitting JOBS jobs of a 2^CYCLES_LOG-row
# Fibonacci program from one process, three ways:
#   (c) one worker on GPU 0 alone            (the one-worker baseline)
#   (a) one worker on both GPUs              (one pool, two slots)
#   (b) two workers, GPU 0 and GPU 1          (MIDEN_GPU_DEVICES=0 / =1)
# Each gets a fresh server and store. Prints proofs/min, the ratio to (c) and the queue latency
# (submit-to-result less the proving time the worker reports), and the GPU gauges the workers'
# /metrics showed (NVML). Logs go to $OUT/fleet (or /tmp/fleet-logs). Bounded: every wait has a
# timeout and the whole run stops starting new work after TOTAL_S seconds.
#
# Binaries (override with the variables):
#   MIDEN_GPU_BIN    target/release/miden-gpu              cargo build --release --features cuda,miden,service --bin miden-gpu
#   FLEET_BENCH_BIN  target/release/examples/fleet_bench   cargo build --release --features cuda,miden,service --example fleet_bench
#   NATS_SERVER      nats-server (Debian's package; on a machine without network, unpacked with dpkg -x)
# EXECUTION=parallel gives the workers `--execution parallel` (their default is reference);
# WORKERS_PER_GPU=K gives each worker `--workers` K per GPU it serves (default: the pool's).
# A quick check on the CPU:
#   BACKEND=cpu CYCLES_LOG=12 JOBS=8 scripts/fleet_bench.sh
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
BIN=${MIDEN_GPU_BIN:-$here/../target/release/miden-gpu}
BENCH=${FLEET_BENCH_BIN:-$here/../target/release/examples/fleet_bench}
NATS_SERVER=${NATS_SERVER:-nats-server}
BACKEND=${BACKEND:-cuda}
JOBS=${JOBS:-16}
CYCLES_LOG=${CYCLES_LOG:-20}
WARM_UP=${WARM_UP:-8}
PORT=${NATS_PORT:-4222}
METRICS_PORT=${METRICS_PORT:-9100}
GPU_A=${GPU_A:-0}
GPU_B=${GPU_B:-1}
TOTAL_S=${TOTAL_S:-450}
BENCH_S=${BENCH_S:-170}
LOG=${OUT:+$OUT/fleet}
LOG=${LOG:-/tmp/fleet-logs}
STORE=$(mktemp -d /tmp/fleet-js.XXXXXX)
deadline=$((SECONDS + TOTAL_S))
mkdir -p "$LOG"
# NVRTC from the pip wheel where the checkout has it (scripts/test.sh fetches it)
nvrtc=$here/../.nvrtc/nvidia/cuda_nvrtc/lib
[ -d "$nvrtc" ] && export LD_LIBRARY_PATH="$(cd "$nvrtc" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

say() { echo "fleet_bench.sh: $*" | tee -a "$LOG/fleet.txt"; }

server_pid=""
worker_pids=()
scraper_pid=""


# Waits up to $2 seconds for $1 (a command) to succeed.
wait_for() {
  local until=$((SECONDS + $2))
  while ! eval "$1" 2>/dev/null; do
    [ "$SECONDS" -ge "$until" ] && return 1
    sleep 0.2
  done
}

start_server() {
  rm -rf "$STORE/js"
  "$NATS_SERVER" -js -a 127.0.0.1 -p "$PORT" -sd "$STORE/js" >>"$LOG/nats-$1.log" 2>&1 &
  server_pid=$!
  if ! wait_for "exec 9<>/dev/tcp/127.0.0.1/$PORT" 15; then
    say "nats-server did not listen on port $PORT (log: $LOG/nats-$1.log)"
    return 1
  fi
  exec 9>&-
}

stop_server() {
  [ -n "$server_pid" ] || return 0
  kill -TERM "$server_pid" 2>/dev/null
  wait_for "! kill -0 $server_pid" 10 || kill -KILL "$server_pid" 2>/dev/null
  wait "$server_pid" 2>/dev/null
  server_pid=""
}

# start_worker <config> <name> <metrics port> [devices]: a worker, started once it serves.
start_worker() {
  local log="$LOG/$1-$2.log"
  local gpus=1 workers=()
  [ -z "${4:-}" ] && gpus=$(echo "$GPU_A,$GPU_B" | tr ',' '\n' | wc -l)
  [ -n "${WORKERS_PER_GPU:-}" ] && workers=(--workers $((WORKERS_PER_GPU * gpus)))
  if [ -n "${4:-}" ]; then
    env MIDEN_GPU_DEVICES="$4" RUST_LOG=miden_gpu=info "$BIN" serve --nats "nats://127.0.0.1:$PORT" \
      --backend "$BACKEND" --name "$2" --metrics "127.0.0.1:$3" ${EXECUTION:+--execution $EXECUTION} "${workers[@]}" >"$log" 2>&1 &
  else
    env -u MIDEN_GPU_DEVICES RUST_LOG=miden_gpu=info "$BIN" serve --nats "nats://127.0.0.1:$PORT" \
      --backend "$BACKEND" --name "$2" --metrics "127.0.0.1:$3" ${EXECUTION:+--execution $EXECUTION} "${workers[@]}" >"$log" 2>&1 &
  fi
  local pid=$!
  worker_pids+=("$pid")
  if ! wait_for "grep -q 'serving jobs' '$log' || ! kill -0 $pid" 180 || ! kill -0 "$pid" 2>/dev/null; then
    say "worker $2 did not start; its log ($log):"
    tail -20 "$log"
    return 1
  fi
  grep -E 'prover pool started|NVML|GPU utilization' "$log" | sed 's/^/    /' | tee -a "$LOG/fleet.txt"
}

stop_workers() {
  local pid
  for pid in "${worker_pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${worker_pids[@]}"; do
    wait_for "! kill -0 $pid" 20 || kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  worker_pids=()
}

# GET /metrics on port $1.
scrape() {
  exec 8<>"/dev/tcp/127.0.0.1/$1" || return 1
  printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&8
  timeout 5 cat <&8
  exec 8>&-
}

# Scrapes the GPU gauges of the given metrics ports every 3 s into $1 until killed.
scrape_loop() {
  local file=$1 port
  shift
  while true; do
    for port in "$@"; do
      scrape "$port" 2>/dev/null | grep -E '^miden_gpu_(gpu|committer)_' | sed "s/^/$SECONDS port=$port /" >>"$file"
    done
    sleep 3
  done
}

# run_config <label> <worker spec>...; a spec is name:devices (devices empty: every GPU).
run_config() {
  local label=$1 spec name devices port ports=() left
  shift
  left=$((deadline - SECONDS))
  if [ "$left" -lt 60 ]; then
    say "$label: skipped, $left s left of TOTAL_S"
    return 1
  fi
  say "$label: workers $*"
  start_server "$label" || return 1
  port=$METRICS_PORT
  for spec in "$@"; do
    name=${spec%%:*}
    devices=${spec#*:}
    [ "$BACKEND" = cpu ] && devices=""
    if ! start_worker "$label" "$name" "$port" "$devices"; then
      stop_workers
      stop_server
      return 1
    fi
    ports+=("$port")
    port=$((port + 1))
  done
  scrape_loop "$LOG/metrics-$label.txt" "${ports[@]}" &
  scraper_pid=$!
  left=$((deadline - SECONDS - 30))
  [ "$left" -lt "$BENCH_S" ] || left=$BENCH_S
  timeout -k 5 "$left" "$BENCH" --nats "nats://127.0.0.1:$PORT" --jobs "$JOBS" --cycles-log "$CYCLES_LOG" \
    --warm-up "$WARM_UP" --timeout "$left" --label "$label" >"$LOG/bench-$label.txt" 2>&1
  local status=$?
  kill "$scraper_pid" 2>/dev/null
  wait "$scraper_pid" 2>/dev/null
  scraper_pid=""
  for port in "${ports[@]}"; do scrape "$port" >"$LOG/metrics-$label-$port.prom" 2>/dev/null; done
  stop_workers
  stop_server
  if [ "$status" -ne 0 ]; then
    say "$label: fleet_bench failed (status $status; $LOG/bench-$label.txt):"
    tail -15 "$LOG/bench-$label.txt"
    return 1
  fi
  grep -E '^(fleet|warm-up|[0-9]+ jobs in)' "$LOG/bench-$label.txt" | sed 's/^/    /' | tee -a "$LOG/fleet.txt"
  # the busiest sample of each GPU while the bench ran
  if grep -q '^[0-9]* port=[0-9]* miden_gpu_gpu_utilization_percent' "$LOG/metrics-$label.txt" 2>/dev/null; then
    grep 'miden_gpu_gpu_utilization_percent' "$LOG/metrics-$label.txt" |
      awk '{key=$2" "$3; v=$NF+0; if (!(key in max) || v > max[key]) max[key]=v} END {for (k in max) print "    peak utilization " k " " max[k] "%"}' |
      sort | tee -a "$LOG/fleet.txt"
    grep 'miden_gpu_gpu_temperature_celsius' "$LOG/metrics-$label.txt" |
      awk '{key=$2" "$3; v=$NF+0; if (!(key in max) || v > max[key]) max[key]=v} END {for (k in max) print "    peak temperature " k " " max[k] " C"}' |
      sort | tee -a "$LOG/fleet.txt"
  else
    say "$label: no GPU gauges in the workers' metrics (see the workers' logs for why)"
  fi
}

cleanup() {
  [ -n "$scraper_pid" ] && kill "$scraper_pid" 2>/dev/null
  stop_workers
  stop_server
  rm -rf "$STORE"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT TERM

: >"$LOG/fleet.txt"
for tool in "$BIN" "$BENCH" "$NATS_SERVER"; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    say "missing: $tool"
    exit 1
  fi
done
say "backend $BACKEND, $JOBS jobs of 2^$CYCLES_LOG rows, warm-up $WARM_UP, logs in $LOG"
command -v nvidia-smi >/dev/null 2>&1 && timeout 20 nvidia-smi -L 2>&1 | tee -a "$LOG/fleet.txt"

status=0
run_config c-one-worker-gpu0 "w0:$GPU_A" || status=1
run_config a-one-worker-both "both:$GPU_A,$GPU_B" || status=1
run_config b-two-workers "w0:$GPU_A" "w1:$GPU_B" || status=1

# Summary: proofs/min, ratio to the baseline, queue latency
echo
say "summary ($JOBS jobs of 2^$CYCLES_LOG rows, backend $BACKEND)"
field() { grep -o "$1=[^ ]*" <<<"$2" | cut -d= -f2; }
base=""
printf '%-20s %10s %7s %10s %10s %10s %10s\n' config proofs/min ratio proving_s queue_mean queue_med queue_max |
  tee -a "$LOG/fleet.txt"
for label in c-one-worker-gpu0 a-one-worker-both b-two-workers; do
  line=$(grep '^fleet_bench:' "$LOG/bench-$label.txt" 2>/dev/null | tail -1)
  if [ -z "$line" ]; then
    printf '%-20s %10s\n' "$label" "no result" | tee -a "$LOG/fleet.txt"
    continue
  fi
  rate=$(field proofs_per_min "$line")
  [ -n "$base" ] || [ "$label" != c-one-worker-gpu0 ] || base=$rate
  ratio=$(awk -v r="$rate" -v b="${base:-0}" 'BEGIN { if (b > 0) printf "%.2fx", r / b; else print "-" }')
  printf '%-20s %10.2f %7s %10.2f %10.2f %10.2f %10.2f\n' "$label" "$rate" "$ratio" \
    "$(field proving_mean_s "$line")" "$(field queue_mean_s "$line")" \
    "$(field queue_median_s "$line")" "$(field queue_max_s "$line")" | tee -a "$LOG/fleet.txt"
done
say "done in $SECONDS s"
exit "$status"
