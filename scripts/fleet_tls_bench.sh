#!/usr/bin/env bash
# The fleet's queue latency per job with TLS off and on, on one host (loopback): a local
# nats-server with JetStream, plain then with TLS (certificates made here with openssl), one
# `miden-gpu serve` worker on the CPU, and ROUNDS runs of `fleet_bench --jobs 1` each, one job at
# a time (a 2^CYCLES_LOG-row Fibonacci proof), so that a job never waits for a slot: its queue
# latency (submission to result, less the proving its worker reports) is the queue's own cost.
# Prints each mode's mean and median over the rounds. Logs go to $OUT/fleet-tls (or
# /tmp/fleet-tls-logs).
#
# Binaries (override with the variables):
#   MIDEN_GPU_BIN    target/release/miden-gpu              cargo build --release --features miden,service --bin miden-gpu
#   FLEET_BENCH_BIN  target/release/examples/fleet_bench   cargo build --release --features miden,service --example fleet_bench
#   NATS_SERVER      nats-server
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
BIN=${MIDEN_GPU_BIN:-$here/../target/release/miden-gpu}
BENCH=${FLEET_BENCH_BIN:-$here/../target/release/examples/fleet_bench}
NATS_SERVER=${NATS_SERVER:-nats-server}
ROUNDS=${ROUNDS:-10}
CYCLES_LOG=${CYCLES_LOG:-10}
PORT=${NATS_PORT:-4333}
LOG=${OUT:+$OUT/fleet-tls}
LOG=${LOG:-/tmp/fleet-tls-logs}
WORK=$(mktemp -d /tmp/fleet-tls.XXXXXX)
mkdir -p "$LOG"

server_pid=""
worker_pid=""
cleanup() {
  [ -n "$worker_pid" ] && kill "$worker_pid" 2>/dev/null
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

# a CA and a certificate of the server for 127.0.0.1
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=fleet-ca \
  -keyout "$WORK/ca-key.pem" -out "$WORK/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
  -keyout "$WORK/server-key.pem" -out "$WORK/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > "$WORK/ext"
openssl x509 -req -in "$WORK/server.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca-key.pem" \
  -CAcreateserial -days 1 -extfile "$WORK/ext" -out "$WORK/server.pem" 2>/dev/null

# Runs one mode: $1 its name, $2 the server's extra configuration, $3 the URL, $4... the
# clients' extra arguments.
run_mode() {
  local mode=$1 extra=$2 url=$3
  shift 3
  rm -rf "$WORK/store"
  printf 'listen: 127.0.0.1:%s\njetstream { store_dir: "%s" }\n%s\n' "$PORT" "$WORK/store" "$extra" \
    > "$WORK/$mode.conf"
  "$NATS_SERVER" -c "$WORK/$mode.conf" > "$LOG/server-$mode.log" 2>&1 &
  server_pid=$!
  sleep 1
  RUST_LOG=miden_gpu=warn "$BIN" serve --nats "$url" "$@" --backend cpu --workers 1 \
    > "$LOG/worker-$mode.log" 2>&1 &
  worker_pid=$!
  local values=()
  for round in $(seq "$ROUNDS"); do
    local line
    line=$("$BENCH" --nats "$url" ${TLSCA:+--tlsca "$TLSCA"} --jobs 1 --warm-up 1 \
      --cycles-log "$CYCLES_LOG" --timeout 60 --label "$mode-$round" 2>>"$LOG/bench-$mode.log" |
      tee -a "$LOG/bench-$mode.log" | grep '^fleet_bench:')
    values+=("$(sed -n 's/.*queue_mean_s=\([0-9.]*\).*/\1/p' <<< "$line")")
  done
  kill "$worker_pid" 2>/dev/null; wait "$worker_pid" 2>/dev/null; worker_pid=""
  kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; server_pid=""
  printf '%s\n' "${values[@]}" | sort -n | awk -v mode="$mode" '
    { v[NR] = $1 * 1000; sum += v[NR] }
    END { printf "%-8s %2d jobs: queue latency mean %.1f ms, median %.1f ms, min %.1f ms, max %.1f ms\n",
          mode, NR, sum / NR, (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), v[1], v[NR] }'
}

TLSCA="" run_mode plain "" "nats://127.0.0.1:$PORT"
tls_conf="tls { cert_file: \"$WORK/server.pem\", key_file: \"$WORK/server-key.pem\" }"
TLSCA="$WORK/ca.pem" run_mode tls "$tls_conf" "tls://127.0.0.1:$PORT" --tlsca "$WORK/ca.pem"
