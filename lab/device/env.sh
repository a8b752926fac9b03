# env.sh — sourced THERE by the one-call device scripts (inv.sh, wg16.sh, skinny.sh), from the repository
# root: $OUT (default /tmp/out) and $R (the root); MK, the make arguments for an sm_90a build with the
# Debian libraries of .dev/deps.tar.xz (lab/device/prepare.sh) where it was carried; LD_LIBRARY_PATH with
# those libraries, the CUDA toolkit's and build-sm90.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT; R=$PWD
MK=("NVCC_ARCH=-gencode arch=compute_90a,code=sm_90a")
if [ -f .dev/deps.tar.xz ]; then
  D=/tmp/devdeps; mkdir -p $D && tar xJf .dev/deps.tar.xz -C $D
  export LD_LIBRARY_PATH=$D/lib:${LD_LIBRARY_PATH:-}
  MK+=(PCRE2_CFLAGS=-I$D/inc "PCRE2_LIBS=-L$D/lib -Wl,-rpath,$D/lib -lpcre2-8" "MHD_LIBS=-L$D/lib -Wl,-rpath,$D/lib -lmicrohttpd")
fi
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do [ -d "$d" ] && export LD_LIBRARY_PATH="$d:${LD_LIBRARY_PATH:-}"; done
export LD_LIBRARY_PATH="$R/build-sm90:$LD_LIBRARY_PATH"
