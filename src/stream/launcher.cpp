// Whether an MPI launcher started this process: each sets a variable of its own in the
// environment of the processes it starts.
#include <cstdlib>

#include "stream/mpi_transport.hpp"

namespace weft::stream::detail {

bool launched_by_mpi() noexcept {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE",
                           "MV2_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

}  // namespace weft::stream::detail
