# Finds what the library, tools, tests and benchmarks need. The library itself needs only
# Threads (and hwloc, optionally, for pinning); everything else is for tools/tests/bench.
find_package(Threads REQUIRED)

# ---- hwloc (optional: topology in `weft info`, worker pinning) ----
find_package(PkgConfig QUIET)
set(WEFT_HAVE_HWLOC OFF)
if(PkgConfig_FOUND)
  pkg_check_modules(HWLOC IMPORTED_TARGET hwloc)
  if(HWLOC_FOUND)
    set(WEFT_HAVE_HWLOC ON)
  endif()
endif()

# ---- SQLite (optional: the graph layer's calibration store) ----
find_package(SQLite3 QUIET)
set(WEFT_HAVE_SQLITE ${SQLite3_FOUND})
set(WEFT_SQLITE_OWN_DECLARATIONS OFF)
if(NOT SQLite3_FOUND)
  # The library without its header (libsqlite3.so.0 but no libsqlite3-dev, as on the GPU
  # machines, where nothing can be installed): declare the API ourselves
  # (src/graph/mapping/sqlite3_declarations.hpp says why that is safe).
  find_library(WEFT_SQLITE3_LIBRARY NAMES sqlite3 libsqlite3.so.0)
  if(WEFT_SQLITE3_LIBRARY)
    set(WEFT_HAVE_SQLITE ON)
    set(WEFT_SQLITE_OWN_DECLARATIONS ON)
    message(STATUS "weft: SQLite without its header: ${WEFT_SQLITE3_LIBRARY}, API declared by weft")
  endif()
endif()

# ---- CUDA ----
set(WEFT_HAVE_CUDA OFF)
if(NOT WEFT_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(WEFT_HAVE_CUDA ON)
  elseif(WEFT_CUDA STREQUAL "ON")
    message(FATAL_ERROR "WEFT_CUDA=ON but no CUDA compiler was found (is nvcc on PATH?)")
  endif()
endif()
if(WEFT_HAVE_CUDA)
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  # CMake 3.25 (Debian 12) does not know nvcc 13's C++20 flag; newer CMake does.
  if(CMAKE_CUDA_COMPILER_ID STREQUAL "NVIDIA" AND NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  endif()
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
endif()

# ---- MPI ----
set(WEFT_HAVE_MPI OFF)
if(NOT WEFT_MPI STREQUAL "OFF")
  find_package(MPI QUIET COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(WEFT_HAVE_MPI ON)
  elseif(WEFT_MPI STREQUAL "ON")
    message(FATAL_ERROR "WEFT_MPI=ON but MPI was not found (install libopenmpi-dev)")
  endif()
endif()

# ---- tools ----
if(WEFT_BUILD_TOOLS OR WEFT_BUILD_BENCH)
  find_package(CLI11 CONFIG REQUIRED)
  find_package(nlohmann_json CONFIG REQUIRED)
  find_package(fmt CONFIG REQUIRED)
endif()

# ---- tests ----
if(WEFT_BUILD_TESTS)
  find_package(GTest CONFIG REQUIRED)
endif()

# ---- benchmark peers: each is optional; a missing peer is reported and skipped ----
set(WEFT_HAVE_TBB OFF)
set(WEFT_HAVE_OPENMP OFF)
set(WEFT_HAVE_STARPU OFF)
if(WEFT_BUILD_BENCH)
  find_package(TBB CONFIG QUIET)
  if(TBB_FOUND)
    set(WEFT_HAVE_TBB ON)
  endif()
  find_package(OpenMP QUIET COMPONENTS CXX)
  if(OpenMP_CXX_FOUND)
    set(WEFT_HAVE_OPENMP ON)
  endif()
  if(PkgConfig_FOUND)
    pkg_check_modules(STARPU IMPORTED_TARGET starpu-1.3)
    if(STARPU_FOUND)
      set(WEFT_HAVE_STARPU ON)
    endif()
  endif()
  message(STATUS "weft bench peers: TBB=${WEFT_HAVE_TBB} OpenMP=${WEFT_HAVE_OPENMP} StarPU=${WEFT_HAVE_STARPU}")
endif()
