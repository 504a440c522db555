# weft - the two commands of the quick start, and a few more.
#   make demo   installs what is missing, builds, runs the main job on this machine's hardware
#   make test   installs what is missing, builds, runs every test (and a ThreadSanitizer build
#               of the concurrency tests)
#   make bench  runs the CPU benchmark suite against TBB, OpenMP and StarPU
#   make deps   installs the missing Debian packages only (idempotent; needs root)

BUILD      ?= build
TSAN_BUILD ?= build-tsan
JOBS       ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=
MACHINE    ?= $(shell scripts/machine-name.sh)

# Debian packages weft needs to build, test and benchmark. nvcc (the CUDA toolkit) is taken
# from the machine when present; weft builds and tests without it.
DEB_PACKAGES := build-essential cmake pkg-config git \
  libgtest-dev libgmock-dev libbenchmark-dev \
  libcli11-dev nlohmann-json3-dev libfmt-dev \
  libhwloc-dev libsqlite3-dev libopenblas-dev liblapacke-dev \
  libopenmpi-dev openmpi-bin \
  libtbb-dev libstarpu-dev spin clang-format

.PHONY: all deps build build-tsan demo test test-fast test-tsan bench clean format

all: build

deps:
	@scripts/install-deps.sh $(DEB_PACKAGES)

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

$(TSAN_BUILD)/CMakeCache.txt:
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DWEFT_SANITIZE=thread \
	  -DWEFT_BUILD_BENCH=OFF -DWEFT_BUILD_TOOLS=OFF -DWEFT_CUDA=OFF $(CMAKE_ARGS)

build-tsan: deps $(TSAN_BUILD)/CMakeCache.txt
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target weft_cpu_tests weft_cpu_stress weft_gpu_host_tests \
	  weft_graph_tests weft_gpu_apps_host_tests weft_split_tests weft_stream_tests

demo: build
	$(BUILD)/tools/weft/weft demo

test: build build-tsan
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)
	scripts/run-tsan-tests.sh $(TSAN_BUILD)

test-fast: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -LE stress

bench: build
	WEFT_MACHINE=$(MACHINE) $(BUILD)/tools/weft/weft bench cpu --samples 7 --json bench/results/$(MACHINE)/cpu.json

format:
	clang-format -i $$(git ls-files '*.hpp' '*.cpp' '*.cuh' '*.cu')

clean:
	rm -rf $(BUILD) $(TSAN_BUILD)
