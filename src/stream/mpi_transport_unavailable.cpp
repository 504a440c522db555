// Built instead of mpi_transport.cpp when weft is configured without MPI: a World is then one
// process, and asking for MPI says why it cannot be had.
#include "stream/mpi_transport.hpp"
#include "weft/error.hpp"

namespace weft::stream::detail {

struct MpiState {};

Operation::Operation() = default;
Operation::~Operation() = default;

std::unique_ptr<MpiTransport> MpiTransport::create(MpiUse use) {
  if (use == MpiUse::On) {
    throw InvalidState("weft::stream::World: MPI asked for, but weft was built without MPI");
  }
  if (use == MpiUse::Auto && launched_by_mpi()) {
    throw InvalidState(
        "weft::stream::World: started by an MPI launcher, but weft was built without MPI (a "
        "World of one process each is not what was meant; pass MpiUse::Off for that)");
  }
  return nullptr;
}

}  // namespace weft::stream::detail
