#!/usr/bin/env bash
# build.sh — set up a fresh Debian 12 machine and build deepinfer.
#
#   ./build.sh            install missing system packages, build lib + CLI + tests
#   ./build.sh test       ... then run the whole test suite (last line: "N passed, N failed, N skipped")
#   ./build.sh asan       ... build with ASan+UBSan in build-asan/ and run the tests (two at a time)
#   ./build.sh cuda       ... compile the CUDA sources (sm_90a, sm_100a) and link build/deepinfer-cuda
#   ./build.sh demo       ... run the main job on the embedded default model
#   ./build.sh fuzz       ... build the libFuzzer targets in build-fuzz/ (run them: fuzz/run_all.sh)
#
# System packages come from apt (Debian 12). Nothing is installed by hand.
set -euo pipefail
cd "$(dirname "$0")"

# libicu72: ICU's runtime library, dlopened (not linked) for DeepSeek-V4.1 Engram
# token keys (src/util/icu_loader.c); the ICU headers (libicu-dev) are not needed.
# libmicrohttpd-dev: the HTTP server library of `deepinfer serve` (tools/serve/).
APT_PACKAGES=(build-essential pkg-config libpcre2-dev libicu72 zlib1g-dev libmicrohttpd-dev)
FUZZ_PACKAGES=(clang libclang-rt-14-dev)

need_install=()
check_pkgs() {
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need_install+=("$p")
    done
}

install_missing() {
    if [ ${#need_install[@]} -eq 0 ]; then return; fi
    echo "build.sh: installing ${need_install[*]}"
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq || true
    $sudo apt-get install -y -qq --no-install-recommends "${need_install[@]}"
}

mode="${1:-build}"
check_pkgs "${APT_PACKAGES[@]}"
# The tests use an npm package (ajv) as an independent JSON Schema validator,
# and Debian's pytest for the Python API's suite (python/tests, run by the test
# runner; skipped in the sanitizer build).
if [ "$mode" = "test" ] || [ "$mode" = "asan" ]; then
    if ! command -v node >/dev/null || ! command -v npm >/dev/null; then check_pkgs nodejs npm; fi
fi
if [ "$mode" = "test" ]; then check_pkgs python3 python3-pytest; fi
if [ "$mode" = "fuzz" ]; then check_pkgs "${FUZZ_PACKAGES[@]}"; fi
install_missing

jobs=$(nproc 2>/dev/null || echo 2)

case "$mode" in
build)
    make -j"$jobs" all
    ;;
test)
    make -j"$jobs" all
    make test
    ;;
asan)
    make -j"$jobs" BUILD=build-asan OPT=-O1 \
        SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined" all
    make asan TEST_ARGS="--jobs $jobs"
    ;;
cuda)
    make -j"$jobs" all
    make -j"$jobs" cuda cuda-tests lab
    ./build/deepinfer-cuda info
    ;;
demo)
    make -j"$jobs" all
    # The embedded default model: validate it, then offline batch generation
    # through the engine (examples/offline_inference.c, then the CLI).
    ./build/deepinfer inspect --model models/deepinfer-demo-v41
    ./build/examples/offline_inference
    ./build/deepinfer generate --prompt "It was a dark and stormy night" --prompt "The old man said" \
        --max-tokens 48 --temperature 0.8 --top-p 0.95 --seed 1
    ;;
fuzz)
    make -j"$jobs" fuzz
    ;;
*)
    echo "usage: ./build.sh [build|test|asan|cuda|demo|fuzz]" >&2
    exit 2
    ;;
esac
