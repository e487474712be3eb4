#!/usr/bin/env bash
# Installs what the test suite needs on a fresh Debian/Ubuntu machine, then runs it.
#
#   ./scripts/test.sh            # everything: CPU, wgpu (lavapipe if no GPU), CUDA NVRTC, Miden
#
# - Vulkan: if no Vulkan driver is present, installs Mesa's lavapipe (`mesa-vulkan-drivers`), a
#   real Vulkan device on the CPU, so every WGSL kernel runs against the CPU oracle.
# - NVRTC: if no libnvrtc is found, downloads the pip wheel `nvidia-cuda-nvrtc-cu12` into
#   .nvrtc/ and points the library path at it, so every CUDA kernel is compiled with no GPU.
# - CUDA parity needs an NVIDIA GPU. Without one it fails, unless MIDEN_GPU_SKIP_CUDA=1 says
#   otherwise; in CI (CI=true, which never has a GPU) this script sets it and says so.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

# 1. Vulkan driver for the wgpu backend
if ! ls /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json >/dev/null 2>&1; then
  echo "test.sh: no Vulkan driver found; installing lavapipe (mesa-vulkan-drivers)"
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mesa-vulkan-drivers libvulkan1 >/dev/null
fi

# 2. NVRTC for compiling the CUDA kernels
if ! ldconfig -p 2>/dev/null | grep -q 'libnvrtc\.so'; then
  nvrtc_dir=.nvrtc/nvidia/cuda_nvrtc/lib
  if ! ls "$nvrtc_dir"/libnvrtc.so* >/dev/null 2>&1; then
    echo "test.sh: no libnvrtc found; fetching the pip wheel nvidia-cuda-nvrtc-cu12 into .nvrtc/"
    mkdir -p .nvrtc
    python3 -m pip download -q --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
      -d .nvrtc/wheel "nvidia-cuda-nvrtc-cu12==12.8.*"
    python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(".nvrtc")' .nvrtc/wheel/*.whl
  fi
  ( cd "$nvrtc_dir" && for f in libnvrtc.so.*[0-9]; do [ -e libnvrtc.so ] || ln -sf "$f" libnvrtc.so; done )
  export LD_LIBRARY_PATH="$PWD/$nvrtc_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

# 3. The suite. Without a GPU, CUDA parity is skipped only where that is said out loud.
if [ "${CI:-}" = "true" ] && ! command -v nvidia-smi >/dev/null 2>&1; then
  export MIDEN_GPU_SKIP_CUDA=1
  echo "test.sh: CI has no NVIDIA GPU: CUDA kernels are compiled by NVRTC, CUDA parity runs on the device (MIDEN_GPU_SKIP_CUDA=1)"
fi
cargo test --release --features cuda,miden "$@"
# Fuzzed parity on the wgpu backend too (lavapipe without a GPU), in bounded time.
MIDEN_GPU_BACKEND=wgpu PROPTEST_CASES=32 cargo test --release --features cuda,miden --test fuzz
