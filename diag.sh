#!/usr/bin/env bash
set -uo pipefail
out=${OUT:-/tmp/o}; mkdir -p $out
for f in .device-deps/*.deb; do dpkg -x "$f" /opt/deps; done
export PKG_CONFIG_PATH=/opt/deps/usr/lib/x86_64-linux-gnu/pkgconfig PKG_CONFIG_SYSROOT_DIR=/opt/deps
cmake -S . -B /tmp/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=/opt/deps/usr -DSWITCHYARD_CUDA=OFF > $out/cfg.log 2>&1
cmake --build /tmp/b -j16 --target switchyard_tests > $out/build.log 2>&1; echo "build rc $? $(date +%T)"
t=/tmp/b/tests/switchyard_tests
SWITCHYARD_TEST_SEED=2384241367 $t -tc="quant linear: the SIMD*" > $out/simd.log 2>&1; echo "simd rc $?"; grep PROBE $out/simd.log | head -80
objdump -d --no-show-raw-insn -C /tmp/b/tests/CMakeFiles/switchyard_tests.dir/operators/kernels/cpu/test_quant_linear.cpp.o > $out/tql.dis; ls -la $out/tql.dis
