#!/usr/bin/env bash
# The checks of the CUDA device that need an NVIDIA GPU, in one run (each step has a time limit; about 11 minutes
# at most):
#   1. tests/test_cuda_device.py, the CUDA half of tests/test_differential.py (real GPU, against the reference), and
#      the complex and fft suites with CUDA as the default device;
#   2. examples/mnist.py on CUDA with its defaults, timed to its test accuracy (/usr/bin/time -v);
#   3. bench/bench.py --device CUDA (the CPU workloads' sizes) and bench/gpu_probe.py (sizes that fill the chip,
#      against the card's copy bandwidth and float32 matmul rate measured through PyTorch when it is there);
#   4. the core and transform suites with CUDA as the semantics device, and the jit, control-flow, random and nn
#      suites with CUDA as the default device (as .ci/run does on PoCL for CL).
# Each step has its own time limit, so a slow one cannot take the others' time. Logs go to $OUT (default
# ./gpu_check_out). Needs NVRTC and libcuda (pip install nvidia-cuda-nvrtc-cu12, or a CUDA toolkit), numpy, pytest
# and hypothesis; pytest-xdist is used when installed. Data for mnist: TINYJX_DATA_DIR or Debian's package.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_check_out}; mkdir -p "$OUT"
# JAX_PLATFORMS: where JAX is installed as a test oracle, it runs on the CPU and leaves the GPU to the device under test
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD JAX_PLATFORMS=cpu TINYJX_CACHE_DIR=${TINYJX_CACHE_DIR:-$(mktemp -d)}
XDIST=$(python3 -c "import xdist" 2>/dev/null && echo "-n 12" || echo "")
step() { echo; echo "== $1"; }
quiet() { grep -v -e PytestBenchmarkWarning -e "warner(" -e "bringing up nodes"; }

step "GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
python3 -c "from tinyjx.devices import cuda; print('NVRTC', cuda.nvrtc().version, '| available:', cuda.available())"

step "CUDA tests"
PYTEST="python3 -m pytest -q -p no:cacheprovider $XDIST"
timeout 90 $PYTEST -rs tests/test_cuda_device.py 2>&1 | quiet | tee "$OUT/test_cuda.log" | tail -8
timeout 60 $PYTEST tests/test_differential.py -k CUDA 2>&1 | quiet | tee "$OUT/test_diff.log" | tail -3
TINYJX_DEVICE=CUDA timeout 60 $PYTEST tests/test_complex.py tests/test_fft.py 2>&1 | quiet \
  | tee "$OUT/test_complex.log" | tail -3

step "examples/mnist.py on CUDA, defaults"
timeout ${MNIST_LIMIT:-200} env TINYJX_DEVICE=CUDA /usr/bin/time -v python3 examples/mnist.py ${MNIST_ARGS:-} \
  > "$OUT/mnist.log" 2>&1
grep -E "trained|test accuracy|Elapsed|Maximum resident" "$OUT/mnist.log"
TINYJX_DEVICE=CUDA DEBUG=2 timeout 40 python3 examples/mnist.py --steps 3 > "$OUT/mnist_debug2.log" 2>&1

step "bench --device CUDA"
TINYJX_BENCH_NO_JAX=1 TINYJX_BENCH_NO_TORCH=1 timeout 90 python3 bench/bench.py --quick --device CUDA 2>&1 \
  | tee "$OUT/bench.log" | tail -20
step "gpu_probe"
timeout 60 python3 bench/gpu_probe.py --device CUDA 2>&1 | tee "$OUT/probe.log"

step "suites on CUDA"
TINYJX_TEST_DEVICE=CUDA TINYJX_DEVICE=CUDA TINYJX_EAGER_COMPILE_MS=0 TINYJX_TEST_EXAMPLES=0.1 timeout 70 \
  python3 -m pytest -q -p no:cacheprovider $XDIST tests/test_array.py tests/test_numpy_elementwise.py \
  tests/test_numpy_reductions.py tests/test_numpy_shape.py tests/test_indexing.py tests/test_lax.py tests/test_ad.py \
  tests/test_vmap.py tests/test_custom_rules.py tests/test_compose.py 2>&1 | quiet | tee "$OUT/suites_core.log" \
  | tail -4
TINYJX_DEVICE=CUDA TINYJX_TEST_EXAMPLES=0.25 timeout 60 python3 -m pytest -q -p no:cacheprovider $XDIST \
  tests/test_jit.py tests/test_control_flow.py tests/test_random.py tests/test_nn_layers.py tests/test_nn_optim.py \
  tests/test_nn_module.py 2>&1 | quiet | tee "$OUT/suites_jit_nn.log" | tail -4
