// World: the public face of a World's core, and the names of the stream layer's enums.
#include "weft/stream/world.hpp"

#include "stream/mpi_transport.hpp"
#include "stream/world_core.hpp"

namespace weft::stream {

World::World(WorldOptions options)
    : core_(std::make_unique<detail::WorldCore>(std::move(options))) {}
World::~World() = default;

int World::size() const noexcept { return core_->size(); }
int World::processes() const noexcept { return core_->processes(); }
int World::process_rank() const noexcept { return core_->process_rank(); }
int World::streams_per_process() const noexcept { return core_->streams(); }
bool World::uses_mpi() const noexcept { return core_->mpi() != nullptr; }
bool World::mpi_cuda_aware() const noexcept {
  return core_->mpi() != nullptr && core_->mpi()->cuda_aware();
}
const WorldOptions& World::options() const noexcept { return core_->options(); }
void World::run(const std::function<void(TaskStream&)>& body) { core_->run(body); }
const std::vector<std::string>& World::errors() const noexcept { return core_->errors(); }

std::string_view to_string(Path path) noexcept {
  switch (path) {
    case Path::None:
      return "none";
    case Path::HostCopy:
      return "host-copy";
    case Path::DeviceCopy:
      return "device-copy";
    case Path::PeerCopy:
      return "peer-copy";
    case Path::StagedCopy:
      return "staged-copy";
    case Path::HostToDevice:
      return "host-to-device";
    case Path::DeviceToHost:
      return "device-to-host";
    case Path::Mpi:
      return "mpi";
    case Path::MpiStaged:
      return "mpi-staged";
    case Path::MpiCudaAware:
      return "mpi-cuda-aware";
    case Path::MpiIpc:
      return "mpi-ipc";
  }
  return "unknown";
}

std::string_view to_string(Policy policy) noexcept {
  switch (policy) {
    case Policy::Simple:
      return "simple";
    case Policy::ImprovedSimple:
      return "improved-simple";
    case Policy::ReadWrite:
      return "read-write";
    case Policy::Async:
      return "async";
  }
  return "unknown";
}

std::string_view to_string(RegionState state) noexcept {
  switch (state) {
    case RegionState::InHost:
      return "in-host";
    case RegionState::InDevice:
      return "in-device";
    case RegionState::InAll:
      return "in-all";
  }
  return "unknown";
}

}  // namespace weft::stream
