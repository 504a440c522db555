#include "weft/graph/device/bfc_allocator.hpp"

#include <algorithm>
#include <bit>
#include <string>

#include "weft/error.hpp"

namespace weft::graph {

namespace {

std::size_t round_up(std::size_t bytes) {
  return (bytes + BfcAllocator::kAlignment - 1) / BfcAllocator::kAlignment *
         BfcAllocator::kAlignment;
}

std::string mib(std::size_t bytes) {
  return std::to_string(bytes / (1 << 20)) + "." +
         std::to_string(bytes % (1 << 20) * 10 / (1 << 20)) + " MiB";
}

}  // namespace

BfcAllocator::BfcAllocator(BackingAllocator backing, BfcOptions options)
    : backing_(std::move(backing)), options_(options), next_region_(options.first_region) {
  if (!backing_.allocate || !backing_.release) {
    throw InvalidArgument("weft::graph::BfcAllocator: the backing allocator '" + backing_.name +
                          "' needs both an allocate and a release function");
  }
  if (options_.first_region == 0 || options_.max_region == 0) {
    throw InvalidArgument("weft::graph::BfcAllocator: first_region and max_region must be > 0");
  }
  next_region_ = round_up(std::min(options_.first_region, options_.max_region));
}

BfcAllocator::~BfcAllocator() {
  for (const Region& r : regions_) {
    if (r.size != 0) backing_.release(reinterpret_cast<void*>(r.base));
  }
}

int BfcAllocator::bin_of(std::size_t size) noexcept {
  // Bin b holds sizes in [256 << b, 256 << (b + 1)); the last bin everything larger.
  const int b = static_cast<int>(std::bit_width(size / kAlignment)) - 1;
  return std::clamp(b, 0, kBins - 1);
}

void BfcAllocator::insert_free(std::uintptr_t address, std::size_t size) {
  bins_[bin_of(size)].emplace(size, address);
}

void BfcAllocator::erase_free(std::uintptr_t address, std::size_t size) {
  bins_[bin_of(size)].erase({size, address});
}

std::uintptr_t BfcAllocator::find_free(std::size_t size) {
  // Best fit: the smallest chunk of size >= `size`, scanning bins from the request's class up.
  for (int b = bin_of(size); b < kBins; ++b) {
    auto it = bins_[b].lower_bound({size, 0});
    if (it != bins_[b].end()) return it->second;
  }
  return 0;
}

bool BfcAllocator::grow(std::size_t size) {
  std::size_t region = std::max(size, next_region_);
  if (stats_.bytes_reserved + region > options_.limit) region = size;
  if (stats_.bytes_reserved + region > options_.limit) return false;
  void* p = backing_.allocate(region);
  if (p == nullptr && region > size) {
    region = size;  // the geometric step was too much: the request alone may still fit
    p = backing_.allocate(region);
  }
  if (p == nullptr) return false;
  const auto base = reinterpret_cast<std::uintptr_t>(p);
  if (base % kAlignment != 0) {
    backing_.release(p);
    throw InvalidArgument("weft::graph::BfcAllocator: the backing allocator '" + backing_.name +
                          "' returned a region not aligned to 256 bytes");
  }
  regions_.push_back({base, region, 0});
  chunks_.emplace(base, Chunk{region, regions_.size() - 1, false});
  insert_free(base, region);
  stats_.bytes_reserved += region;
  ++stats_.regions;
  ++stats_.backing_allocations;
  next_region_ = std::min(next_region_ * 2, round_up(options_.max_region));
  return true;
}

void* BfcAllocator::allocate(std::size_t bytes) {
  if (bytes == 0) throw InvalidArgument("weft::graph::BfcAllocator::allocate: 0 bytes");
  if (bytes > SIZE_MAX - kAlignment) {
    throw OutOfMemory("weft::graph::BfcAllocator::allocate: " + std::to_string(bytes) +
                      " bytes is more than any allocator holds");
  }
  const std::size_t size = round_up(bytes);
  std::lock_guard lock(mutex_);
  std::uintptr_t address = find_free(size);
  if (address == 0 && !grow(size)) {
    trim_locked();  // empty regions may be what stands between the backing and this request
    if (!grow(size)) {
      throw OutOfMemory("weft::graph::BfcAllocator: cannot allocate " + std::to_string(bytes) +
                        " bytes from '" + backing_.name + "': " + mib(stats_.bytes_in_use) +
                        " in use, " + mib(stats_.bytes_reserved) +
                        " reserved, largest free chunk " + mib(largest_free_locked()) +
                        (options_.limit != SIZE_MAX ? ", limit " + mib(options_.limit) : ""));
    }
  }
  if (address == 0) address = find_free(size);
  Chunk& c = chunks_.at(address);
  erase_free(address, c.size);
  if (c.size - size >= kAlignment) {  // split: the rest stays free in the same region
    const std::uintptr_t rest = address + size;
    chunks_.emplace(rest, Chunk{c.size - size, c.region, false});
    insert_free(rest, c.size - size);
    c.size = size;
  }
  c.in_use = true;
  ++regions_[c.region].live;
  stats_.bytes_in_use += c.size;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  ++stats_.allocations;
  return reinterpret_cast<void*>(address);
}

void BfcAllocator::deallocate(void* p) {
  const auto address = reinterpret_cast<std::uintptr_t>(p);
  std::lock_guard lock(mutex_);
  auto it = chunks_.find(address);
  if (it == chunks_.end() || !it->second.in_use) {
    throw InvalidArgument("weft::graph::BfcAllocator::deallocate: " +
                          std::string(it == chunks_.end()
                                          ? "a pointer '" + backing_.name + "' did not allocate"
                                          : "a pointer already freed"));
  }
  Chunk& c = it->second;
  c.in_use = false;
  --regions_[c.region].live;
  stats_.bytes_in_use -= c.size;
  ++stats_.frees;
  // Coalesce with the free neighbours in the same region (chunks of a region are contiguous in
  // the address map; a neighbour from another region is never merged).
  auto next = std::next(it);
  if (next != chunks_.end() && !next->second.in_use && next->second.region == c.region) {
    erase_free(next->first, next->second.size);
    c.size += next->second.size;
    chunks_.erase(next);
  }
  if (it != chunks_.begin()) {
    auto prev = std::prev(it);
    if (!prev->second.in_use && prev->second.region == c.region) {
      erase_free(prev->first, prev->second.size);
      prev->second.size += c.size;
      chunks_.erase(it);
      it = prev;
    }
  }
  insert_free(it->first, it->second.size);
}

std::size_t BfcAllocator::trim_locked() {
  std::size_t given = 0;
  for (Region& r : regions_) {
    if (r.size == 0 || r.live != 0) continue;
    erase_free(r.base, r.size);  // an empty region is one free chunk
    chunks_.erase(r.base);
    backing_.release(reinterpret_cast<void*>(r.base));
    stats_.bytes_reserved -= r.size;
    --stats_.regions;
    given += r.size;
    r.size = 0;
  }
  return given;
}

std::size_t BfcAllocator::trim() {
  std::lock_guard lock(mutex_);
  return trim_locked();
}

std::size_t BfcAllocator::largest_free_locked() const {
  for (int b = kBins - 1; b >= 0; --b) {
    if (!bins_[b].empty()) return bins_[b].rbegin()->first;
  }
  return 0;
}

BfcStats BfcAllocator::stats() const {
  std::lock_guard lock(mutex_);
  BfcStats s = stats_;
  s.largest_free_chunk = largest_free_locked();
  return s;
}

}  // namespace weft::graph
