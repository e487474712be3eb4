#!/usr/bin/env bash
# Installs what the test suite needs, checks formatting, lints and docs, then runs every test.
# Passes on a fresh machine: Linux with or without a GPU, macOS.
#
#   ./scripts/test.sh                          # everything this machine can run
#   MIDEN_GPU_REQUIRE=cuda,wgpu ./scripts/test.sh   # a missing CUDA device or wgpu adapter fails
#
# - Linux: if no Vulkan driver is present, installs Mesa's lavapipe (`mesa-vulkan-drivers`, as
#   root or through sudo), a real Vulkan device on the CPU, so every WGSL kernel runs against the
#   CPU oracle. If no libnvrtc is found, fetches the pip wheel `nvidia-cuda-nvrtc-cu12` into
#   .nvrtc/, so every CUDA kernel is compiled with no GPU. Tests with feature `cuda`.
# - macOS: wgpu runs on Metal; the `cuda` feature is left out.
# - Everywhere: installs `nats-server` where it is missing (apt as root or through sudo; brew on
#   macOS), for the prover fleet's tests (features `service`, `otlp`), which start their own
#   servers.
# - Tests that need a device this machine lacks (no NVIDIA driver, say) are reported as ignored
#   with the reason, and the summary at the end lists them; where the device is present, any
#   failure fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."

# every line carries the time since the start, so a slow phase shows in any run's log
say() { printf 'test.sh [%dm%02ds]: %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then sudo "$@"
  else return 1
  fi
}

# 1. What this machine needs
case "$(uname -s)" in
  Linux)
    features=cuda,miden,service,otlp
    if ! ls /usr/share/vulkan/icd.d/*.json >/dev/null 2>&1 && ! ls /etc/vulkan/icd.d/*.json >/dev/null 2>&1; then
      if command -v apt-get >/dev/null 2>&1 &&
        as_root apt-get update -qq &&
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mesa-vulkan-drivers libvulkan1 >/dev/null
      then
        say "no Vulkan driver was present; installed lavapipe (mesa-vulkan-drivers)"
      else
        say "no Vulkan driver, and lavapipe could not be installed (needs apt and root or sudo): wgpu device tests will be ignored"
      fi
    fi
    if ! ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so'; then
      nvrtc_dir=.nvrtc/nvidia/cuda_nvrtc/lib
      if ! ls "$nvrtc_dir"/libnvrtc.so* >/dev/null 2>&1; then
        say "no libnvrtc found; fetching the pip wheel nvidia-cuda-nvrtc-cu12 into .nvrtc/"
        mkdir -p .nvrtc
        python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
          -d .nvrtc/wheel "nvidia-cuda-nvrtc-cu12==12.8.*" &&
          python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(".nvrtc")' .nvrtc/wheel/*.whl ||
          say "could not fetch NVRTC: CUDA compilation tests will be ignored"
      fi
      if ls "$nvrtc_dir"/libnvrtc.so.*[0-9] >/dev/null 2>&1; then
        ( cd "$nvrtc_dir" && for f in libnvrtc.so.*[0-9]; do [ -e libnvrtc.so ] || ln -sf "$f" libnvrtc.so; done )
        export LD_LIBRARY_PATH="$PWD/$nvrtc_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      fi
    fi
    ;;
  Darwin)
    features=miden,service,otlp
    ;;
  *)
    features=miden,service,otlp
    ;;
esac
if ! command -v nats-server >/dev/null 2>&1; then
  if [ "$(uname -s)" = Darwin ] && command -v brew >/dev/null 2>&1 && brew install -q nats-server >/dev/null; then
    say "installed nats-server (brew) for the fleet's tests"
  elif command -v apt-get >/dev/null 2>&1 &&
    as_root apt-get update -qq &&
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nats-server >/dev/null
  then
    say "installed nats-server (apt) for the fleet's tests"
  else
    say "no nats-server, and it could not be installed (apt with root or sudo, or brew): the fleet's tests will be ignored"
  fi
fi

# Without a desktop session, Mesa's device-select Vulkan layer looks for a display and prints an
# error about XDG_RUNTIME_DIR; compute needs no display (the binaries do the same at start-up).
[ -n "${XDG_RUNTIME_DIR:-}" ] || export NODEVICE_SELECT=1

# 2. Formatting, lints and docs, every warning an error; the library and its tests are linted
# again without the GPU backends (their absence is a configuration of its own)
say "checking formatting, lints (features: $features; and no GPU backend) and docs"
cargo fmt --all -- --check
cargo clippy --release --all-targets --features "$features" -- -D warnings
cargo clippy --release --lib --tests --no-default-features --features concurrent,tools -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --release --no-deps --features "$features"

# 3. The dependency tree's licences and banned crates (deny.toml); cargo-deny is built once where
# missing, unoptimized (on two cores 56 s against 147 s optimized; the check still takes
# seconds). Its advisory check needs the RustSec database from the network: see the README.
if ! command -v cargo-deny >/dev/null 2>&1; then
  say "installing cargo-deny for the licence and bans check"
  cargo install --locked --quiet --debug cargo-deny
fi
say "checking the dependencies' licences and bans"
cargo deny --log-level error check licenses bans

# 4. The suite, then fuzzed parity on the wgpu backend (lavapipe without a GPU) in bounded time.
# Every step builds in the `checked` profile (Cargo.toml): this crate with overflow checks and
# debug assertions, its dependencies as in release, built once for all of them.
log=target/test-log.txt
mkdir -p target
status=0
profile=(--profile checked)
say "the test suite (features: $features; profile checked)"
# the examples are not built here (none is a test, and clippy above has checked them): each one
# compiles the whole prover again, minutes of the build on two cores
cargo test "${profile[@]}" --features "$features" --lib --bins --tests 2>&1 | tee "$log" || status=$?
cargo test "${profile[@]}" --features "$features" --doc 2>&1 | tee -a "$log" || status=$?
if [ "$status" -eq 0 ]; then
  say "fuzzed parity on the wgpu backend"
  MIDEN_GPU_BACKEND=wgpu PROPTEST_CASES=32 cargo test "${profile[@]}" --features "$features" --test fuzz 2>&1 |
    tee -a "$log" || status=$?
fi

# 4a. Faults injected inside the backends (feature `fault-injection`, tests only): every device
# operation of a commitment, the DEEP steps and a FRI phase fails in turn, on wgpu (lavapipe
# without a GPU; about a minute) and, where a device is present, on CUDA; and `miden-gpu prove`
# on a backend returning wrong roots writes only a proof that verifies.
if [ "$status" -eq 0 ]; then
  say "faults inside the backends (feature fault-injection)"
  cargo test "${profile[@]}" --features "$features,fault-injection" --test backend_faults 2>&1 |
    tee -a "$log" || status=$?
  cargo test "${profile[@]}" --features "$features,fault-injection" --test cli \
    prove_never_writes_a_proof_that_does_not_verify 2>&1 | tee -a "$log" || status=$?
fi

# 4b. Without the GPU backends: the library's unit tests and the tests of bad input and faults
# (a backend asked for but not compiled in is a typed error).
if [ "$status" -eq 0 ]; then
  say "the library without the GPU backends (features concurrent,tools)"
  cargo test "${profile[@]}" --no-default-features --features concurrent,tools --lib \
    --test errors --test faults 2>&1 | tee -a "$log" || status=$?
fi

# 4c. Where a test may create a memory-limited cgroup (root, a writable cgroup memory
# controller), the container-memory test.
if [ "$status" -eq 0 ]; then
  memory_cgroup=""
  for dir in /sys/fs/cgroup /sys/fs/cgroup/unified; do
    if grep -qw memory "$dir/cgroup.controllers" 2>/dev/null; then memory_cgroup=$dir; break; fi
  done
  [ -n "$memory_cgroup" ] || [ ! -e /sys/fs/cgroup/memory/memory.limit_in_bytes ] ||
    memory_cgroup=/sys/fs/cgroup/memory
  if [ "$(id -u)" -eq 0 ] && [ -n "$memory_cgroup" ] && [ -w "$memory_cgroup" ]; then
    say "the container-memory test (a memory-limited cgroup)"
    cargo test "${profile[@]}" --features "$features" --test host_memory -- --ignored 2>&1 |
      tee -a "$log" || status=$?
  else
    say "skipped the cgroup memory-limit test (tests/host_memory.rs): it needs root and a writable cgroup memory controller"
  fi
fi

# 5. Summary: what passed, and what did not run here and why
passed=$(grep -oE '^test result: [a-zA-Z]+\. [0-9]+ passed' "$log" | awk '{s += $4} END {print s + 0}')
failed=$(grep -oE '[0-9]+ failed' "$log" | awk '{s += $1} END {print s + 0}')
echo
say "summary: $passed passed, $failed failed"
sed -i -E 's/\x1b\[[0-9;]*m//g' "$log"
if grep -qE '^test .* \.\.\. ignored \(' "$log"; then
  say "skipped on this machine, with the reason:"
  grep -E '^test .* \.\.\. ignored \(' "$log" | sed -E 's/^test ([^ ]+) +\.\.\. ignored \((.*)\)$/  - \1: \2/'
fi
if grep -qE '^test .* \.\.\. ignored(, .*)?$' "$log"; then
  say "left out unless asked for (-- --ignored): $(grep -cE '^test .* \.\.\. ignored(, .*)?$' "$log") tests marked #[ignore] (timing, soak, documentation examples)"
fi
exit "$status"
