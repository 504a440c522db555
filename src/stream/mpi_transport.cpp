// Messages between processes over MPI (see mpi_transport.hpp for the protocol).
//
// Every MPI call is made under one process-wide lock: the calls are short tests and posts,
// and the lock keeps an MPI that offers only MPI_THREAD_SERIALIZED correct as well.
#include "stream/mpi_transport.hpp"

#include <mpi.h>
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "stream/stream_core.hpp"
#include "stream/world_core.hpp"
#include "weft/error.hpp"

namespace weft::stream::detail {

namespace {

constexpr std::size_t kInlineBytes = 240;  // a message up to this travels in its header
// Device buffers from this size go over CUDA IPC between processes of a node; smaller ones are
// staged, which costs less than IPC's reply round trip (docs/decisions/032-streams-paths.md).
constexpr std::size_t kIpcMinBytes = 256 * 1024;
// Control messages, on the World's control communicator.
constexpr int kNoticeTag = 1;   // a stream ended: what it sent, and to whom
constexpr int kBarrierTag = 2;  // a process reached barrier (run, generation)
constexpr int kEndTag = 3;      // a process reached the end of run `run`
constexpr int kCloseTag = 4;    // a process destroyed its World after `runs` runs
constexpr int kLastTag = 5;     // the last control message of a process closing its World
constexpr int kSlots = 4;       // pinned slots a staged device message pipelines through
constexpr std::size_t kHeadersPerBlock = 64;  // pinned headers are allocated this many at once

/// What goes first: the message's size and, for a small one, its bytes.
struct Header {
  std::uint64_t bytes = 0;
  std::uint64_t flags = 0;  // kIpcHeader: `data` holds an IpcHandle, and no payload follows
  std::byte data[kInlineBytes];
};
constexpr std::uint64_t kIpcHeader = 1;
constexpr std::uint64_t kAck = 1;   // the receiver copied the buffer (or took the header in)
constexpr std::uint64_t kNack = 2;  // it could not map it: send the payload in chunks
constexpr std::uint64_t kFail = 3;  // it mapped it, but its copy failed: the send fails too
constexpr int kHeaderFixed = 16;

std::mutex& mpi_lock() {
  static std::mutex m;
  return m;
}

std::string mpi_error(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<std::size_t>(length));
}

void check(int code, const char* call) {
  if (code != MPI_SUCCESS) throw MessageError(std::string(call) + " failed: " + mpi_error(code));
}

std::string rank_name(int rank) { return "rank " + std::to_string(rank); }

}  // namespace

/// An MPI operation's progress: which stage it is in and the MPI requests it waits on.
struct MpiState {
  // Finishing: a send that failed partway, waiting for the messages it has in flight.
  enum class Stage : std::uint8_t {
    Queued,
    Header,
    Payload,
    Draining,
    IpcReply,
    IpcCopy,
    Finishing
  };
  Stage stage = Stage::Queued;
  // Pinned, from the transport's pool: a small device message is copied into and out of its
  // header by DMA, with no pageable staging in between. Taken when the op is posted, given
  // back when it leaves its stream's list (every MPI request on it has ended by then).
  Header* header = nullptr;
  std::vector<MPI_Request> requests;  // the header's, or the payload chunks' in flight
  bool all_posted = false;            // every MPI message of the op has been posted
  // Payload chunks: how many, the next to post, the next to finish.
  std::size_t chunks = 0;
  std::size_t next_post = 0;
  std::size_t next_done = 0;
  // Staged device payloads: a pinned slot per chunk in flight, and the copy event of each.
  void* slot[kSlots] = {};
  EventPtr copy[kSlots];
  MPI_Request slot_request[kSlots] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL,
                                      MPI_REQUEST_NULL};
  bool staged = false;
  std::vector<std::byte> scratch;                // where a mismatched message's payload is drained
  bool ipc = false;                              // the header offered the buffer over CUDA IPC
  std::uint64_t reply = 0;                       // kAck, kNack or kFail, sent or received
  MPI_Request reply_request = MPI_REQUEST_NULL;  // a receiver's reply, in flight
  bool cut_short = false;  // empty payload messages came, or this side failed: take, not copy
  std::string own_error;   // this side's failure partway, reported once the message is through
  std::string mismatch;
};

Operation::Operation() = default;
Operation::~Operation() = default;

namespace {

/// What another process said of one of its streams when the stream ended.
struct RemoteEnd {
  bool ended = false;
  std::uint64_t barriers = 0;
  std::map<std::pair<int, int>, std::uint64_t> sent;  // (destination rank, tag) -> messages
};

class MpiWorld final : public MpiTransport {
 public:
  MpiWorld() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized == 0) {
      int provided = 0;
      check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
      std::atexit([] {
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (finalized == 0) MPI_Finalize();
      });
    }
    int provided = 0;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_SERIALIZED) {
      throw InvalidState(
          "weft::stream::World: the MPI was initialised without thread support (at least "
          "MPI_THREAD_SERIALIZED is needed: initialise it with MPI_Init_thread)");
    }
    check(MPI_Comm_dup(MPI_COMM_WORLD, &data_), "MPI_Comm_dup");
    check(MPI_Comm_dup(MPI_COMM_WORLD, &control_), "MPI_Comm_dup");
    MPI_Comm_set_errhandler(data_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(data_, &rank_);
    MPI_Comm_size(data_, &size_);
    void* value = nullptr;
    int found = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &value, &found);
    tag_ub_ = found != 0 ? *static_cast<int*>(value) : 32767;
#if defined(MPIX_CUDA_AWARE_SUPPORT)
    cuda_aware_ = MPIX_Query_cuda_support() == 1;
#endif
    find_node_mates();
  }
  ~MpiWorld() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized != 0) return;
    try {
      close();
    } catch (const std::exception& e) {  // a destructor cannot throw: say it where it shows
      std::fprintf(stderr, "weft::stream::World (process %d): closing failed: %s\n", rank_,
                   e.what());
    }
    for (void* slot : pool_) host_free(slot);
    for (Header* block : header_blocks_) host_free(block);
    MPI_Comm_free(&data_);
    MPI_Comm_free(&control_);
  }

  int rank() const noexcept override { return rank_; }
  int size() const noexcept override { return size_; }
  bool cuda_aware() const noexcept override { return cuda_aware_; }

  void check_agreement(int streams, std::size_t chunk_bytes, std::size_t eager_bytes) override {
    const long long mine[3] = {streams, static_cast<long long>(chunk_bytes),
                               static_cast<long long>(eager_bytes)};
    std::vector<long long> all(static_cast<std::size_t>(size_) * 3);
    check(MPI_Allgather(mine, 3, MPI_LONG_LONG, all.data(), 3, MPI_LONG_LONG, control_),
          "MPI_Allgather");
    const char* names[3] = {"streams_per_process", "chunk_bytes", "eager_bytes"};
    for (int p = 0; p < size_; ++p) {
      for (int k = 0; k < 3; ++k) {
        const long long theirs = all[static_cast<std::size_t>(p * 3 + k)];
        if (theirs != mine[k]) {
          throw MessageError("weft::stream::World: process " + std::to_string(p) + " has " +
                             names[k] + " = " + std::to_string(theirs) + ", process " +
                             std::to_string(rank_) + " has " + std::to_string(mine[k]) +
                             " (every process must give the same)");
        }
      }
    }
    chunk_ = chunk_bytes;
    // drain() decodes tags with it, even for a World that is never built (none is decoded
    // where the count is out of range: nothing was sent).
    if (streams > 0) streams_ = streams;
  }

  void agree_built(bool built) override {
    const int mine = built ? 1 : 0;
    std::vector<int> all(static_cast<std::size_t>(size_));
    check(MPI_Allgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, control_), "MPI_Allgather");
    if (!built) return;  // the caller throws its own error
    for (int p = 0; p < size_; ++p) {
      if (all[static_cast<std::size_t>(p)] == 0) {
        throw InvalidState("weft::stream::World: process " + std::to_string(p) +
                           " could not build its part of the World (its own error says why)");
      }
    }
  }

  int max_user_tag(int streams) const noexcept override {
    const long long per_tag = 3LL * streams * streams;
    // From tag_ub_, not tag_ub_ + 1: every channel's tag then stays below tag_ub_, the tag of
    // a closing process's last data message (last_data_tag).
    return static_cast<int>(static_cast<long long>(tag_ub_) / per_tag) - 3;
  }

  void attach(WorldCore& world) override {
    world_ = &world;
    streams_ = world.streams();
    ipc_ = world.options().cuda_ipc;
  }

  // ---- posting and progress (the stream's own thread) ----

  void post(StreamCore& stream, const OpPtr& op) override {
    op->mpi = std::make_unique<MpiState>();
    {
      std::lock_guard lock(mpi_lock());
      op->mpi->header = take_header();
    }
    stream.mpi_ops().push_back(op);
    progress(stream);
  }

  void progress(StreamCore& stream) override {
    auto& ops = stream.mpi_ops();
    std::lock_guard lock(mpi_lock());
    for (std::size_t i = 0; i < ops.size(); ++i) {
      Operation& op = *ops[i];
      if (op.ended()) continue;
      try {
        if (op.mpi->stage == MpiState::Stage::Queued && !channel_clear(ops, i)) continue;
        if (op.kind == OpKind::Send) {
          advance_send(stream, op);
        } else {
          advance_recv(stream, op);
        }
      } catch (const std::exception& e) {
        if (op.kind == OpKind::Send && finish_after_failure(stream, op, e.what())) continue;
        if (op.kind == OpKind::Recv && keep_taking_payload(op, e.what())) continue;
        if (op.kind == OpKind::Recv) tell_sender_ipc_failed(stream, op);
        fail(op, e.what());
      }
    }
    std::erase_if(ops, [this](const OpPtr& op) {
      if (!op->ended()) return false;
      retire(*op->mpi);
      return true;
    });
  }

  void abandon_receives(StreamCore& stream, std::vector<std::string>& problems) override {
    progress(stream);
    auto& ops = stream.mpi_ops();
    for (;;) {
      bool busy = false;
      {
        std::lock_guard lock(mpi_lock());
        for (const OpPtr& op : ops) {
          if (op->kind != OpKind::Recv || op->ended()) continue;
          if (!withdraw_receive(stream, *op)) {
            busy = true;  // its payload is arriving into the buffer: let it land
            continue;
          }
          problems.push_back(rank_name(op->self) + " ended with a receive from " +
                             rank_name(op->peer) + " (tag " + std::to_string(op->tag) +
                             ") pending");
          fail(*op, "the receiving stream ended");
        }
      }
      if (!busy) break;
      progress(stream);
      std::this_thread::yield();
    }
  }

  void stream_ended(StreamCore& stream) override {
    // The news first, then the sends: a receiver may be waiting on this stream for a message
    // it never sent, and only the news frees it to end and take in what this stream sends.
    std::vector<long long> notice{stream.rank(), static_cast<long long>(stream.barriers),
                                  static_cast<long long>(stream.remote_sent.size())};
    for (const auto& [key, count] : stream.remote_sent) {
      notice.push_back(key.first);
      notice.push_back(key.second);
      notice.push_back(static_cast<long long>(count));
    }
    std::vector<MPI_Request> sent;
    {
      std::lock_guard lock(mpi_lock());
      for (int p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        MPI_Request r = MPI_REQUEST_NULL;
        check(MPI_Isend(notice.data(), static_cast<int>(notice.size()), MPI_LONG_LONG, p,
                        kNoticeTag, control_, &r),
              "MPI_Isend");
        sent.push_back(r);
      }
    }
    wait_all(sent);
    // Sends still in flight are finished by the caller's thread in end_run.
  }

  // ---- news of ended streams (any thread) ----

  void poll_notices(WorldCore& world) override {
    bool changed = false;
    {
      std::lock_guard lock(mpi_lock());
      while (const auto message = take_control(kNoticeTag)) {
        const std::vector<long long>& notice = message->words;
        std::lock_guard news(news_mutex_);
        RemoteEnd& end = remote_[static_cast<int>(notice[0])];
        end.ended = true;
        end.barriers = static_cast<std::uint64_t>(notice[1]);
        for (std::size_t k = 0; k < static_cast<std::size_t>(notice[2]); ++k) {
          const std::size_t at = 3 + 3 * k;
          end.sent[{static_cast<int>(notice[at]), static_cast<int>(notice[at + 1])}] =
              static_cast<std::uint64_t>(notice[at + 2]);
        }
        changed = true;
      }
      changed = take_closes() || changed;
    }
    if (changed) {
      for (int i = 0; i < world.streams(); ++i) world.stream(i).notify();
    }
  }

  // The processes' barrier is a message from each process to every other, naming the run and
  // the barrier; a collective would be left pending by a barrier that fails, and matched by
  // the next one. An arrival of an earlier run or barrier (of one that failed here) is passed
  // over.
  void barrier(WorldCore& world, StreamCore& stream, std::uint64_t generation) override {
    std::unique_ptr<Arrivals> arrivals;
    {
      std::lock_guard lock(mpi_lock());
      arrivals = std::make_unique<Arrivals>(control_, rank_, size_, kBarrierTag, run_,
                                            static_cast<long long>(generation));
    }
    for (;;) {
      bool all = true;
      {
        std::lock_guard lock(mpi_lock());
        for (int p = 0; p < size_; ++p) {
          if (!arrivals->test(p)) all = false;
        }
      }
      if (all) break;
      if (!stream.mpi_ops().empty()) progress(stream);  // its sends may be what others wait for
      poll_notices(world);
      const std::string blocker = barrier_blocker(generation);
      if (!blocker.empty()) throw MessageError(blocker);  // ~Arrivals ends the exchange
    }
    wait_all(arrivals->take_sends());
  }

  // Why barrier `generation` cannot complete: a process's World is gone, or a stream ended
  // before reaching it; empty while it may.
  std::string barrier_blocker(std::uint64_t generation) {
    std::lock_guard news(news_mutex_);
    for (const auto& [process, runs] : closed_) {
      if (runs < run_) return gone_text(process);
    }
    for (const auto& [rank, end] : remote_) {
      if (end.ended && end.barriers <= generation) {
        return rank_name(rank) + " ended without reaching barrier " + std::to_string(generation);
      }
    }
    return {};
  }

  void begin_run(WorldCore&) override {
    ++run_;  // every process runs the same bodies in turn: the runs' numbers agree
    std::lock_guard news(news_mutex_);
    remote_.clear();
    drained_.clear();
    for (const auto& [process, runs] : closed_) {
      if (runs < run_) mark_gone(process);
    }
  }

  void end_run(WorldCore& world, std::vector<std::string>& problems) override {
    // The streams' threads have ended: their sends still in flight are this thread's to finish
    // now, while it takes in what was sent to them (two processes whose streams both left
    // sends unreceived finish here, each draining the other's). The end exchange comes
    // whatever happens before it: a process that skipped it would leave the others waiting
    // there, and its close (after as many runs) would not free them.
    try {
      for (;;) {
        poll_notices(world);
        drain(problems);
        bool sending = false;
        for (int i = 0; i < world.streams(); ++i) {
          StreamCore& s = world.stream(i);
          if (s.mpi_ops().empty()) continue;
          progress(s);
          sending = sending || !s.mpi_ops().empty();
        }
        if (!sending && all_accounted(world)) break;
        std::this_thread::sleep_for(std::chrono::microseconds(100));
      }
    } catch (const std::exception& e) {
      problems.push_back(std::string("ending the run failed: ") + e.what());
    }
    end_barrier(problems);
  }

 private:
  // ---- tags ----
  // Three MPI messages kinds per channel: headers, payload chunks, and the receiver's replies
  // to a CUDA IPC header.
  enum Kind : int { kHeader = 0, kPayload = 1, kReply = 2 };
  [[nodiscard]] int mpi_tag(int tag, Kind kind, int from_local, int to_local) const noexcept {
    return ((tag * 3 + kind) * streams_ + from_local) * streams_ + to_local;
  }
  struct Decoded {
    int tag;
    Kind kind;
    int from_local;
    int to_local;
  };
  [[nodiscard]] Decoded decode(int mpi_tag) const noexcept {
    Decoded d{};
    d.to_local = mpi_tag % streams_;
    mpi_tag /= streams_;
    d.from_local = mpi_tag % streams_;
    mpi_tag /= streams_;
    d.kind = static_cast<Kind>(mpi_tag % 3);
    d.tag = mpi_tag / 3;
    return d;
  }
  [[nodiscard]] int process_of(int rank) const noexcept { return rank / streams_; }
  [[nodiscard]] int local_of(int rank) const noexcept { return rank % streams_; }

  [[nodiscard]] std::size_t chunk_count(std::uint64_t bytes) const noexcept {
    if (bytes <= kInlineBytes) return 0;
    return static_cast<std::size_t>((bytes + chunk_ - 1) / chunk_);
  }
  [[nodiscard]] std::size_t chunk_length(std::uint64_t bytes, std::size_t i) const noexcept {
    return static_cast<std::size_t>(std::min<std::uint64_t>(chunk_, bytes - i * chunk_));
  }

  // Ops of one stream with one peer and one tag and of one kind post their MPI messages one
  // op after another.
  static bool channel_clear(const std::deque<OpPtr>& ops, std::size_t i) {
    const Operation& op = *ops[i];
    for (std::size_t k = 0; k < i; ++k) {
      const Operation& before = *ops[k];
      if (before.kind == op.kind && before.peer == op.peer && before.tag == op.tag &&
          !before.ended() && !before.mpi->all_posted) {
        return false;
      }
    }
    return true;
  }

  static void fail(Operation& op, const std::string& what) {
    cancel_requests(*op.mpi);
    op.error = std::make_exception_ptr(MessageError(what));
    op.status.store(OpStatus::Failed, std::memory_order_release);  // pairs with wait's acquire
  }
  static void done(Operation& op, Path path) {
    op.path = path;
    op.status.store(OpStatus::Done, std::memory_order_release);  // pairs with wait's acquire
  }

  static void cancel_requests(MpiState& st) {
    if (st.reply_request != MPI_REQUEST_NULL) {
      MPI_Wait(&st.reply_request, MPI_STATUS_IGNORE);  // one word, sent eagerly
    }
    for (MPI_Request& r : st.requests) {
      if (r == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
    st.requests.clear();
    for (MPI_Request& r : st.slot_request) {
      if (r == MPI_REQUEST_NULL) continue;
      MPI_Cancel(&r);
      MPI_Wait(&r, MPI_STATUS_IGNORE);
    }
  }

  /// True once every request of `requests` has completed (the finished ones are removed).
  /// Payload receives also set `*cut_short` when one of them took an empty message (see
  /// tell_receiver_cut_short).
  static bool test_all(std::vector<MPI_Request>& requests, bool* cut_short = nullptr) {
    std::vector<MPI_Request> left;
    for (MPI_Request& r : requests) {
      int flag = 0;
      MPI_Status status;
      check(MPI_Test(&r, &flag, &status), "MPI_Test");
      if (flag == 0) {
        left.push_back(r);
      } else if (cut_short != nullptr && is_empty(status)) {
        *cut_short = true;
      }
    }
    requests.swap(left);
    return requests.empty();
  }

  static bool is_empty(const MPI_Status& status) {
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    return count == 0;
  }

  static std::string cut_short_error(const Operation& op) {
    return rank_name(op.peer) + "'s send with tag " + std::to_string(op.tag) + " to " +
           rank_name(op.self) + " failed partway (its error is reported where it was sent)";
  }

  static void wait_all(std::vector<MPI_Request> requests) {
    for (;;) {
      {
        std::lock_guard lock(mpi_lock());
        if (test_all(requests)) return;
      }
      std::this_thread::yield();
    }
  }

  void* take_slot() {
    if (!pool_.empty()) {
      void* p = pool_.back();
      pool_.pop_back();
      return p;
    }
    return host_alloc(chunk_);
  }
  Header* take_header() {
    if (free_headers_.empty()) {
      auto* block = static_cast<Header*>(host_alloc(kHeadersPerBlock * sizeof(Header)));
      header_blocks_.push_back(block);
      for (std::size_t i = 0; i < kHeadersPerBlock; ++i) free_headers_.push_back(block + i);
    }
    Header* h = free_headers_.back();
    free_headers_.pop_back();
    *h = Header{};
    return h;
  }
  void give_header(MpiState& st) {
    if (st.header != nullptr) free_headers_.push_back(st.header);
    st.header = nullptr;
  }
  /// An op that ended gives back its header and slots; a failed one's copies into or out of
  /// its slots finish first, so that no slot is handed on while one is still landing.
  void retire(MpiState& st) {
    for (EventPtr& copy : st.copy) {
      if (!copy) continue;
      try {
        copy->wait();
      } catch (const std::exception&) {
        // The device failed: its copies will not touch the slot any more.
      }
      copy.reset();
    }
    give_header(st);
    give_slots(st);
  }
  void give_slots(MpiState& st) {
    for (void*& p : st.slot) {
      if (p != nullptr) pool_.push_back(p);
      p = nullptr;
    }
  }
  // Pinned slots come from the first stream's device (any device's pinned memory serves all).
  void* host_alloc(std::size_t bytes) { return world_->stream(0).device().allocate_pinned(bytes); }
  void host_free(void* p) {
    if (world_ != nullptr) world_->stream(0).device().release_pinned(p);
  }

  [[nodiscard]] Path device_path() const noexcept {
    return cuda_aware_ ? Path::MpiCudaAware : Path::MpiStaged;
  }

  // ---- CUDA IPC between processes of one node ----

  // Which processes share this one's node (and so may map each other's GPU memory).
  void find_node_mates() {
    MPI_Comm node = MPI_COMM_NULL;
    check(MPI_Comm_split_type(data_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node),
          "MPI_Comm_split_type");
    int members = 0;
    MPI_Comm_size(node, &members);
    std::vector<int> ranks(static_cast<std::size_t>(members));
    check(MPI_Allgather(&rank_, 1, MPI_INT, ranks.data(), 1, MPI_INT, node), "MPI_Allgather");
    MPI_Comm_free(&node);
    same_node_.assign(static_cast<std::size_t>(size_), false);
    for (int r : ranks) same_node_[static_cast<std::size_t>(r)] = true;
  }

  // The sender offers its buffer: once the kernels before the send are done, a header with
  // the buffer's IPC handle, and a receive for the reply. True when it did (or waits to).
  bool offer_ipc(StreamCore& stream, Operation& op, int dest) {
    MpiState& st = *op.mpi;
    if (!ipc_ || op.buffer.memory != Memory::Device || op.buffer.bytes < kIpcMinBytes ||
        !same_node_[static_cast<std::size_t>(dest)] || dest == rank_) {
      return false;
    }
    if (op.ready && !op.ready->done()) return true;  // Queued until the producing kernels end
    IpcHandle handle;
    if (!stream.device().export_buffer(op.buffer.data, handle)) return false;
    st.header->bytes = op.buffer.bytes;
    st.header->flags = kIpcHeader;
    std::memcpy(st.header->data, &handle, sizeof handle);
    st.chunks = chunk_count(op.buffer.bytes);
    const int header_tag = mpi_tag(op.tag, kHeader, stream.local_index(), local_of(op.peer));
    const int reply_tag = mpi_tag(op.tag, kReply, stream.local_index(), local_of(op.peer));
    MPI_Request r = MPI_REQUEST_NULL;
    check(MPI_Isend(st.header, kHeaderFixed + static_cast<int>(sizeof handle), MPI_BYTE, dest,
                    header_tag, data_, &r),
          "MPI_Isend");
    st.requests.push_back(r);
    check(MPI_Irecv(&st.reply, 1, MPI_UINT64_T, dest, reply_tag, data_, &r), "MPI_Irecv");
    st.requests.push_back(r);
    st.ipc = true;
    st.stage = MpiState::Stage::IpcReply;
    return true;
  }

  bool ipc_reply_arrived(Operation& op) { return test_all(op.mpi->requests); }

  // The receiver maps the sender's buffer and copies from it on its transfer queue; false
  // (after telling the sender to send chunks) where it cannot map it.
  bool start_ipc_copy(StreamCore& stream, Operation& op, int source) {
    MpiState& st = *op.mpi;
    IpcHandle handle;
    std::memcpy(&handle, st.header->data, sizeof handle);
    const void* from = stream.device().import_buffer(handle);  // nullptr: cannot map it
    if (from == nullptr) {
      send_reply(stream, op, source, kNack);
      st.staged = op.buffer.memory == Memory::Device && !cuda_aware_;
      if (!st.staged) post_direct_receives(op, source);
      return true;
    }
    Queue& q = stream.transfers();
    if (op.ready) q.wait(op.ready);
    q.copy(op.buffer.data, from, op.buffer.bytes);
    st.copy[0] = q.record();
    st.ipc = true;
    st.stage = MpiState::Stage::IpcCopy;
    st.all_posted = true;
    return true;
  }

  void send_reply(StreamCore& stream, Operation& op, int source, std::uint64_t reply) {
    MpiState& st = *op.mpi;
    st.reply = reply;
    const int reply_tag = mpi_tag(op.tag, kReply, local_of(op.peer), stream.local_index());
    check(MPI_Isend(&st.reply, 1, MPI_UINT64_T, source, reply_tag, data_, &st.reply_request),
          "MPI_Isend");
  }
  /// The reply (if any) has gone. Kept apart from the payload's receives, whose statuses are
  /// read for their counts: a send's status count is undefined (UCX reports 0).
  static bool reply_sent(MpiState& st) {
    if (st.reply_request == MPI_REQUEST_NULL) return true;
    int flag = 0;
    check(MPI_Test(&st.reply_request, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    return flag != 0;
  }

  /// A receive failed partway on its own side (a copy into the GPU, or its device): its
  /// sender's chunks still come, and cancelling their receives would leave them to the
  /// channel's next message. It takes the rest and fails once the whole message is in: a
  /// staged receive uncopied, making no device call from here on; a direct one not yet posted
  /// into scratch (the Draining stage). False where nothing more comes (an IPC offer) or the
  /// receives are posted already (they land where they were going; MPI's own error).
  bool keep_taking_payload(Operation& op, const std::string& what) {
    MpiState& st = *op.mpi;
    const bool chunks_follow = (st.header->flags & kIpcHeader) == 0 || st.reply == kNack;
    if (st.stage != MpiState::Stage::Payload || st.chunks == 0 || !chunks_follow ||
        !st.own_error.empty()) {
      return false;
    }
    if (st.staged) {
      st.own_error = what;
      st.cut_short = true;
      return true;
    }
    if (st.all_posted) return false;
    st.mismatch = what;
    st.stage = MpiState::Stage::Draining;
    post_scratch_receives(op, process_of(op.peer));
    return true;
  }

  /// A receive that took an IPC header and failed before it replied (its copy failed): the
  /// sender waits for a reply, and gets kFail.
  void tell_sender_ipc_failed(StreamCore& stream, Operation& op) noexcept {
    MpiState& st = *op.mpi;
    const bool owes_reply =
        st.header != nullptr && (st.header->flags & kIpcHeader) != 0 && st.reply == 0 &&
        (st.stage == MpiState::Stage::Payload || st.stage == MpiState::Stage::IpcCopy);
    if (!owes_reply) return;
    st.copy[0].reset();  // its event failed: the device will not copy any more
    try {
      send_reply(stream, op, process_of(op.peer), kFail);
    } catch (const std::exception&) {
      // MPI failed too: nothing more can reach the sender.
    }
  }

  /// A send failed after its header went: it tells the receiver (tell_receiver_cut_short) and
  /// stays pending, Finishing, until the messages it has in flight are through; then it fails.
  /// Ending it at once would let the program reuse a buffer MPI still reads, and cancelling
  /// them would take chunks the receiver counts on out of the channel.
  bool finish_after_failure(StreamCore& stream, Operation& op, const std::string& what) {
    MpiState& st = *op.mpi;
    if (st.stage != MpiState::Stage::Payload) return false;
    tell_receiver_cut_short(stream, op);
    st.own_error = what;
    st.stage = MpiState::Stage::Finishing;
    return true;
  }
  static bool slots_sent(MpiState& st) {
    for (MPI_Request& r : st.slot_request) {
      if (r == MPI_REQUEST_NULL) continue;
      int flag = 0;
      check(MPI_Test(&r, &flag, MPI_STATUS_IGNORE), "MPI_Test");
      if (flag == 0) return false;
    }
    return true;
  }

  // ---- sends ----

  /// A send failed after its header went but before all of its payload did: without word, its
  /// receiver would wait for the rest forever. Each chunk not sent goes as an empty message
  /// instead (a payload chunk is never empty), so that the receiver, whose receives of the
  /// chunks may all be posted already, takes exactly as many messages as the header promised,
  /// sees that some were empty, and fails; the next message on the channel is then untouched.
  void tell_receiver_cut_short(StreamCore& stream, Operation& op) noexcept {
    const MpiState& st = *op.mpi;
    if (st.stage != MpiState::Stage::Payload) return;  // no header went, or an IPC one did
    const int tag = mpi_tag(op.tag, kPayload, stream.local_index(), local_of(op.peer));
    for (std::size_t c = st.next_post; c < st.chunks; ++c) {
      MPI_Request r = MPI_REQUEST_NULL;
      if (MPI_Isend(nullptr, 0, MPI_BYTE, process_of(op.peer), tag, data_, &r) == MPI_SUCCESS) {
        MPI_Request_free(&r);  // sent on its own: the sender has nothing to wait for
      }
    }
  }

  void advance_send(StreamCore& stream, Operation& op) {
    MpiState& st = *op.mpi;
    const int dest = process_of(op.peer);
    const int header_tag = mpi_tag(op.tag, kHeader, stream.local_index(), local_of(op.peer));
    const int payload_tag = mpi_tag(op.tag, kPayload, stream.local_index(), local_of(op.peer));
    const bool on_device = op.buffer.memory == Memory::Device;
    if (st.stage == MpiState::Stage::Finishing) {
      if (test_all(st.requests) && slots_sent(st)) fail(op, st.own_error);
      return;
    }
    if (st.stage == MpiState::Stage::Queued) {
      const std::string gone = gone_reason(dest);
      if (!gone.empty()) {
        fail(op, rank_name(op.self) + " sends a message (tag " + std::to_string(op.tag) + ") to " +
                     rank_name(op.peer) + ", whose " + gone);
        return;
      }
    }
    if (st.stage == MpiState::Stage::Queued && offer_ipc(stream, op, dest)) return;
    if (st.stage == MpiState::Stage::IpcReply) {
      if (!ipc_reply_arrived(op)) return;
      if (st.reply == kAck) {
        done(op, Path::MpiIpc);
        return;
      }
      if (st.reply == kFail) {
        fail(op, rank_name(op.peer) + " mapped the buffer sent with tag " + std::to_string(op.tag) +
                     " over CUDA IPC, but its copy failed (its error is reported there)");
        return;
      }
      st.stage = MpiState::Stage::Payload;  // kNack: the chunks follow as without IPC
      st.staged = true;
    }
    if (st.stage == MpiState::Stage::Queued) {
      st.header->bytes = op.buffer.bytes;
      st.chunks = chunk_count(op.buffer.bytes);
      int header_bytes = kHeaderFixed;
      if (st.chunks == 0) {
        if (on_device) {
          stream.transfers().wait(op.ready);
          stream.transfers().copy(st.header->data, op.buffer.data, op.buffer.bytes);
          stream.transfers().record()->wait();
        } else if (op.buffer.bytes != 0) {
          std::memcpy(st.header->data, op.buffer.data, op.buffer.bytes);
        }
        header_bytes += static_cast<int>(op.buffer.bytes);
      }
      MPI_Request r = MPI_REQUEST_NULL;
      check(MPI_Isend(st.header, header_bytes, MPI_BYTE, dest, header_tag, data_, &r), "MPI_Isend");
      st.requests.push_back(r);
      st.stage = MpiState::Stage::Payload;
      st.staged = on_device && !cuda_aware_;
      if (on_device && cuda_aware_ && st.chunks != 0 && op.ready) op.ready->wait();
    }
    if (st.staged) {
      send_staged_chunks(stream, op, dest, payload_tag);
    } else {
      // Host memory (or a CUDA-aware MPI): every chunk goes at once from the buffer itself.
      auto* bytes = static_cast<std::byte*>(op.buffer.data);
      for (; st.next_post < st.chunks; ++st.next_post) {
        MPI_Request r = MPI_REQUEST_NULL;
        check(MPI_Isend(bytes + st.next_post * chunk_,
                        static_cast<int>(chunk_length(op.buffer.bytes, st.next_post)), MPI_BYTE,
                        dest, payload_tag, data_, &r),
              "MPI_Isend");
        st.requests.push_back(r);
      }
      st.all_posted = true;
    }
    if (st.chunks == 0) st.all_posted = true;
    if (st.all_posted && test_all(st.requests) && st.next_done >= (st.staged ? st.chunks : 0)) {
      give_slots(st);
      done(op, !on_device                    ? Path::Mpi
               : st.staged || st.chunks == 0 ? Path::MpiStaged
                                             : device_path());
    }
  }

  // Chunk i is copied out of the GPU into slot i % kSlots, sent from there once the copy is
  // done, and the slot takes chunk i + kSlots once the send of chunk i has completed.
  void send_staged_chunks(StreamCore& stream, Operation& op, int dest, int payload_tag) {
    MpiState& st = *op.mpi;
    Queue& q = stream.transfers();
    const auto* src = static_cast<const std::byte*>(op.buffer.data);
    auto start_copy = [&](std::size_t chunk) {
      const std::size_t s = chunk % kSlots;
      if (st.slot[s] == nullptr) st.slot[s] = take_slot();
      if (chunk == 0) q.wait(op.ready);
      q.copy(st.slot[s], src + chunk * chunk_, chunk_length(op.buffer.bytes, chunk));
      st.copy[s] = q.record();
    };
    if (st.chunks == 0) return;
    if (st.next_post == 0 && !st.copy[0]) {
      for (std::size_t c = 0; c < std::min<std::size_t>(kSlots, st.chunks); ++c) start_copy(c);
    }
    for (;;) {
      // Post the next chunk once its copy is done.
      if (st.next_post < st.chunks) {
        const std::size_t s = st.next_post % kSlots;
        if (st.slot_request[s] == MPI_REQUEST_NULL && st.copy[s] && st.copy[s]->done()) {
          st.copy[s].reset();
          check(MPI_Isend(st.slot[s], static_cast<int>(chunk_length(op.buffer.bytes, st.next_post)),
                          MPI_BYTE, dest, payload_tag, data_, &st.slot_request[s]),
                "MPI_Isend");
          ++st.next_post;
          if (st.next_post == st.chunks) st.all_posted = true;
          continue;
        }
      }
      // Finish the oldest chunk's send, and refill its slot.
      if (st.next_done < st.next_post) {
        const std::size_t s = st.next_done % kSlots;
        int flag = 0;
        check(MPI_Test(&st.slot_request[s], &flag, MPI_STATUS_IGNORE), "MPI_Test");
        if (flag != 0) {
          ++st.next_done;
          if (st.next_done + kSlots - 1 < st.chunks) start_copy(st.next_done + kSlots - 1);
          continue;
        }
      }
      return;
    }
  }

  // ---- receives ----

  void advance_recv(StreamCore& stream, Operation& op) {
    MpiState& st = *op.mpi;
    const int source = process_of(op.peer);
    const int header_tag = mpi_tag(op.tag, kHeader, local_of(op.peer), stream.local_index());
    const int payload_tag = mpi_tag(op.tag, kPayload, local_of(op.peer), stream.local_index());
    if (st.stage == MpiState::Stage::Queued) {
      if (sender_is_done(stream, op)) {
        fail(op, no_message_text(op));
        return;
      }
      MPI_Request r = MPI_REQUEST_NULL;
      check(MPI_Irecv(st.header, sizeof(Header), MPI_BYTE, source, header_tag, data_, &r),
            "MPI_Irecv");
      st.requests.push_back(r);
      st.stage = MpiState::Stage::Header;
    }
    if (st.stage == MpiState::Stage::Header) {
      int flag = 0;
      check(MPI_Test(&st.requests.front(), &flag, MPI_STATUS_IGNORE), "MPI_Test");
      if (flag == 0) {
        if (sender_is_done(stream, op)) {
          fail(op, no_message_text(op));
        }
        return;
      }
      st.requests.clear();
      ++stream.remote_headers[{op.peer, op.tag}];
      start_payload(stream, op, source, payload_tag);
    }
    if (st.stage == MpiState::Stage::Draining) {
      st.all_posted = true;
      if (test_all(st.requests) && reply_sent(st)) fail(op, st.mismatch);
      return;
    }
    if (st.stage == MpiState::Stage::IpcCopy) {
      if (st.copy[0]) {
        if (!st.copy[0]->done()) return;
        st.copy[0].reset();
        send_reply(stream, op, source, kAck);
      }
      if (reply_sent(st)) done(op, Path::MpiIpc);
      return;
    }
    if (st.staged) receive_staged_chunks(stream, op, source, payload_tag);
    const bool finished = st.all_posted && test_all(st.requests, &st.cut_short) &&
                          st.next_done >= (st.staged ? st.chunks : 0) && reply_sent(st);
    if (finished && st.cut_short) {  // every chunk taken, but some empty or not copied
      give_slots(st);
      fail(op, st.own_error.empty() ? cut_short_error(op) : st.own_error);
      return;
    }
    if (finished) {
      give_slots(st);
      const bool on_device = op.buffer.memory == Memory::Device;
      done(op, !on_device                    ? Path::Mpi
               : st.staged || st.chunks == 0 ? Path::MpiStaged
                                             : device_path());
    }
  }

  void start_payload(StreamCore& stream, Operation& op, int source, int payload_tag) {
    MpiState& st = *op.mpi;
    const std::uint64_t bytes = st.header->bytes;
    st.chunks = chunk_count(bytes);
    if (bytes != op.buffer.bytes) {
      st.mismatch = rank_name(op.peer) + " sent " + std::to_string(bytes) + " bytes with tag " +
                    std::to_string(op.tag) + " to " + rank_name(op.self) +
                    ", whose receive is of " + std::to_string(op.buffer.bytes) + " bytes";
      st.stage = MpiState::Stage::Draining;
      if ((st.header->flags & kIpcHeader) != 0) {  // nothing follows but our reply
        send_reply(stream, op, source, kAck);
        return;
      }
      post_scratch_receives(op, source);
      return;
    }
    st.stage = MpiState::Stage::Payload;
    const bool on_device = op.buffer.memory == Memory::Device;
    if ((st.header->flags & kIpcHeader) != 0 && start_ipc_copy(stream, op, source)) return;
    if (st.chunks == 0) {
      if (on_device) {
        stream.transfers().wait(op.ready);
        stream.transfers().copy(op.buffer.data, st.header->data, bytes);
        stream.transfers().record()->wait();
      } else if (bytes != 0) {
        std::memcpy(op.buffer.data, st.header->data, bytes);
      }
      st.all_posted = true;
      return;
    }
    st.staged = on_device && !cuda_aware_;
    if (st.staged) return;
    (void)payload_tag;
    post_direct_receives(op, source);
  }

  // Every chunk of the message received into one chunk of scratch, to be let go.
  void post_scratch_receives(Operation& op, int source) {
    MpiState& st = *op.mpi;
    const int payload_tag = mpi_tag(op.tag, kPayload, local_of(op.peer), op.owner->local_index());
    st.scratch.resize(st.chunks == 0 ? 0 : chunk_);
    for (std::size_t c = 0; c < st.chunks; ++c) {
      MPI_Request r = MPI_REQUEST_NULL;
      check(MPI_Irecv(st.scratch.data(), static_cast<int>(chunk_length(st.header->bytes, c)),
                      MPI_BYTE, source, payload_tag, data_, &r),
            "MPI_Irecv");
      st.requests.push_back(r);
    }
  }

  // Every chunk received straight into the buffer (host memory, or a CUDA-aware MPI's device
  // buffer).
  void post_direct_receives(Operation& op, int source) {
    MpiState& st = *op.mpi;
    const int payload_tag = mpi_tag(op.tag, kPayload, local_of(op.peer), op.owner->local_index());
    if (op.buffer.memory == Memory::Device && op.ready) op.ready->wait();
    auto* dst = static_cast<std::byte*>(op.buffer.data);
    for (std::size_t c = 0; c < st.chunks; ++c) {
      MPI_Request r = MPI_REQUEST_NULL;
      check(MPI_Irecv(dst + c * chunk_, static_cast<int>(chunk_length(op.buffer.bytes, c)),
                      MPI_BYTE, source, payload_tag, data_, &r),
            "MPI_Irecv");
      st.requests.push_back(r);
    }
    st.all_posted = true;
  }

  // Chunk i arrives in slot i % kSlots and is copied into the GPU from there; the slot takes
  // chunk i + kSlots once that copy is done.
  void receive_staged_chunks(StreamCore& stream, Operation& op, int source, int payload_tag) {
    MpiState& st = *op.mpi;
    Queue& q = stream.transfers();
    auto* dst = static_cast<std::byte*>(op.buffer.data);
    const std::uint64_t bytes = op.buffer.bytes;
    auto post = [&](std::size_t chunk) {
      const std::size_t s = chunk % kSlots;
      if (st.slot[s] == nullptr) st.slot[s] = take_slot();
      check(MPI_Irecv(st.slot[s], static_cast<int>(chunk_length(bytes, chunk)), MPI_BYTE, source,
                      payload_tag, data_, &st.slot_request[s]),
            "MPI_Irecv");
    };
    if (st.next_post == 0) {
      if (st.own_error.empty()) q.wait(op.ready);
      for (; st.next_post < std::min<std::size_t>(kSlots, st.chunks); ++st.next_post)
        post(st.next_post);
      if (st.next_post == st.chunks) st.all_posted = true;
    }
    for (;;) {
      if (st.next_done >= st.chunks) return;
      const std::size_t s = st.next_done % kSlots;
      if (st.slot_request[s] != MPI_REQUEST_NULL) {
        int flag = 0;
        MPI_Status status;
        check(MPI_Test(&st.slot_request[s], &flag, &status), "MPI_Test");
        if (flag == 0) return;
        if (is_empty(status)) st.cut_short = true;
        if (!st.cut_short) {  // once cut short, the rest of the message is taken, not copied
          q.copy(dst + st.next_done * chunk_, st.slot[s], chunk_length(bytes, st.next_done));
          st.copy[s] = q.record();
        }
      }
      if (st.copy[s]) {  // after this side's own failure its events are not asked again
        if (st.own_error.empty() && !st.copy[s]->done()) return;
        st.copy[s].reset();
      }
      ++st.next_done;
      if (st.next_post < st.chunks) {
        post(st.next_post);
        ++st.next_post;
        if (st.next_post == st.chunks) st.all_posted = true;
      }
    }
  }

  /// Cancels a receive whose header has not arrived; false when it has (the header is then
  /// counted and its payload started, for the caller to let land).
  bool withdraw_receive(StreamCore& stream, Operation& op) {
    MpiState& st = *op.mpi;
    if (st.stage == MpiState::Stage::Queued) return true;
    if (st.stage != MpiState::Stage::Header) return false;
    MPI_Request& r = st.requests.front();
    MPI_Cancel(&r);
    MPI_Status status;
    MPI_Wait(&r, &status);
    int cancelled = 0;
    MPI_Test_cancelled(&status, &cancelled);
    st.requests.clear();
    if (cancelled != 0) return true;
    ++stream.remote_headers[{op.peer, op.tag}];
    start_payload(stream, op, process_of(op.peer),
                  mpi_tag(op.tag, kPayload, local_of(op.peer), stream.local_index()));
    return false;
  }

  /// True when `op`'s sender has ended and every message it sent this stream with this tag
  /// has had its header taken.
  bool sender_is_done(StreamCore& stream, const Operation& op) {
    std::lock_guard news(news_mutex_);
    const auto it = remote_.find(op.peer);
    if (it == remote_.end() || !it->second.ended) return false;
    const auto sent = it->second.sent.find({op.self, op.tag});
    const std::uint64_t count = sent == it->second.sent.end() ? 0 : sent->second;
    const auto got = stream.remote_headers.find({op.peer, op.tag});
    return (got == stream.remote_headers.end() ? 0 : got->second) >= count;
  }

  // ---- the end of a run ----

  // Takes in every message that has arrived for this process's streams (all ended now).
  void drain(std::vector<std::string>& problems) {
    std::lock_guard lock(mpi_lock());
    for (;;) {
      int flag = 0;
      MPI_Status status;
      check(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, data_, &flag, &status), "MPI_Iprobe");
      if (flag == 0) return;
      if (status.MPI_TAG == last_data_tag()) {  // a process closing its World sends no more
        long long runs = 0;
        check(MPI_Recv(&runs, 1, MPI_LONG_LONG, status.MPI_SOURCE, status.MPI_TAG, data_,
                       MPI_STATUS_IGNORE),
              "MPI_Recv");
        last_data_.insert(status.MPI_SOURCE);
        continue;
      }
      const Decoded d = decode(status.MPI_TAG);
      if (d.kind != kHeader) {  // a payload whose header a stream took before it ended: let it go
        int count = 0;
        MPI_Get_count(&status, MPI_BYTE, &count);
        std::vector<std::byte> sink(static_cast<std::size_t>(count));
        check(MPI_Recv(sink.data(), count, MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, data_,
                       MPI_STATUS_IGNORE),
              "MPI_Recv");
        continue;
      }
      Header header;
      check(MPI_Recv(&header, sizeof(Header), MPI_BYTE, status.MPI_SOURCE, status.MPI_TAG, data_,
                     MPI_STATUS_IGNORE),
            "MPI_Recv");
      const int from = status.MPI_SOURCE * streams_ + d.from_local;
      const int to = rank_ * streams_ + d.to_local;
      std::vector<std::byte> scratch(std::min<std::uint64_t>(header.bytes, chunk_));
      const int payload_tag = mpi_tag(d.tag, kPayload, d.from_local, d.to_local);
      const bool ipc = (header.flags & kIpcHeader) != 0;
      if (ipc) {  // its sender waits for a reply, not to send chunks
        const std::uint64_t ack = kAck;
        check(MPI_Send(&ack, 1, MPI_UINT64_T, status.MPI_SOURCE,
                       mpi_tag(d.tag, kReply, d.from_local, d.to_local), data_),
              "MPI_Send");
      }
      for (std::size_t c = 0; c < (ipc ? 0 : chunk_count(header.bytes)); ++c) {
        check(MPI_Recv(scratch.data(), static_cast<int>(chunk_length(header.bytes, c)), MPI_BYTE,
                       status.MPI_SOURCE, payload_tag, data_, MPI_STATUS_IGNORE),
              "MPI_Recv");
      }
      ++drained_[{from, to, d.tag}];
      problems.push_back(rank_name(from) + " sent a message (tag " + std::to_string(d.tag) + ", " +
                         std::to_string(header.bytes) + " bytes) to " + rank_name(to) +
                         ", which ended without receiving it");
    }
  }

  // ---- a process whose World is gone ----

  // One exchange of arrivals on the control communicator: this process's (run, step) to
  // every other, and theirs awaited. An arrival naming another run or step (one that failed
  // somewhere, or was left out) is passed over (barrier() says why not a collective). Used
  // under the MPI lock; not movable (MPI holds the addresses of `mine_` and `got_`).
  class Arrivals {
   public:
    Arrivals(MPI_Comm comm, int rank, int size, int tag, long long run, long long step)
        : comm_(comm),
          tag_(tag),
          mine_{run, step},
          recvs_(static_cast<std::size_t>(size), MPI_REQUEST_NULL),
          got_(static_cast<std::size_t>(size)),
          in_(static_cast<std::size_t>(size), false) {
      in_[static_cast<std::size_t>(rank)] = true;
      for (int p = 0; p < size; ++p) {
        if (p == rank) continue;
        MPI_Request r = MPI_REQUEST_NULL;
        check(MPI_Isend(mine_.data(), 2, MPI_LONG_LONG, p, tag_, comm_, &r), "MPI_Isend");
        sends_.push_back(r);
        post(p);
      }
    }
    Arrivals(const Arrivals&) = delete;
    Arrivals& operator=(const Arrivals&) = delete;
    // An exchange left unfinished (a barrier that cannot complete, an error): its receives are
    // cancelled and its sends (a word or two each, eager) waited for, so that MPI writes and
    // reads no freed memory. Takes the MPI lock.
    ~Arrivals() {
      std::lock_guard lock(mpi_lock());
      for (MPI_Request& r : recvs_) {
        if (r == MPI_REQUEST_NULL) continue;
        MPI_Cancel(&r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
      }
      for (MPI_Request& r : sends_) {
        if (r != MPI_REQUEST_NULL) MPI_Wait(&r, MPI_STATUS_IGNORE);
      }
    }

    // True once `p`'s arrival is in (or skipped).
    bool test(int p) {
      const auto i = static_cast<std::size_t>(p);
      if (in_[i]) return true;
      int flag = 0;
      check(MPI_Test(&recvs_[i], &flag, MPI_STATUS_IGNORE), "MPI_Test");
      if (flag == 0) return false;
      if (got_[i] == mine_) return in_[i] = true;
      post(p);  // a stale arrival: wait for this one's
      return false;
    }
    // Stops waiting for `p`'s arrival.
    void skip(int p) {
      const auto i = static_cast<std::size_t>(p);
      if (recvs_[i] != MPI_REQUEST_NULL) {
        MPI_Cancel(&recvs_[i]);
        MPI_Wait(&recvs_[i], MPI_STATUS_IGNORE);
      }
      in_[i] = true;
    }
    // This process's arrivals in flight, for the caller to wait on outside the lock.
    std::vector<MPI_Request> take_sends() { return std::move(sends_); }

   private:
    void post(int p) {
      const auto i = static_cast<std::size_t>(p);
      check(MPI_Irecv(got_[i].data(), 2, MPI_LONG_LONG, p, tag_, comm_, &recvs_[i]), "MPI_Irecv");
    }
    MPI_Comm comm_;
    int tag_;
    std::array<long long, 2> mine_;
    std::vector<MPI_Request> sends_;
    std::vector<MPI_Request> recvs_;
    std::vector<std::array<long long, 2>> got_;
    std::vector<bool> in_;
  };

  // The processes' end of a run, as barrier()'s arrivals, so that a process that destroyed its
  // World before this run is left out and reported, not waited for.
  void end_barrier(std::vector<std::string>& problems) {
    std::unique_ptr<Arrivals> arrivals;
    {
      std::lock_guard lock(mpi_lock());
      arrivals = std::make_unique<Arrivals>(control_, rank_, size_, kEndTag, run_, -1);
    }
    std::vector<int> gone;
    for (;;) {
      bool all = true;
      {
        std::lock_guard lock(mpi_lock());
        // Closes only: every notice of this run is in (all_accounted), and one that arrives
        // now is a faster process's next run's, for that run's begin_run not to forget.
        take_closes();
        std::lock_guard news(news_mutex_);
        for (int p = 0; p < size_; ++p) {
          if (arrivals->test(p)) continue;
          if (is_gone(p)) {  // its arrival will not come
            arrivals->skip(p);
            gone.push_back(p);
            continue;
          }
          all = false;
        }
      }
      if (all) break;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    wait_all(arrivals->take_sends());  // eager; a gone process takes them in as it closes
    std::lock_guard news(news_mutex_);
    for (int p : gone) problems.push_back(gone_text(p));
  }

  // Takes in the other processes' news that their World is gone (under the MPI lock); true
  // when there was any.
  bool take_closes() {
    bool any = false;
    while (const auto message = take_control(kCloseTag)) {
      book_close(message->source, message->words.at(0));
      any = true;
    }
    return any;
  }
  // `process` destroyed its World after `runs` runs: gone from this run on, if it did not
  // make it.
  void book_close(int process, long long runs) {
    std::lock_guard news(news_mutex_);
    closed_[process] = runs;
    if (runs < run_) mark_gone(process);
  }

  // A control message: who sent it, its tag and its words.
  struct ControlMessage {
    int source = 0;
    int tag = 0;
    std::vector<long long> words;
  };
  // The next control message with `tag` (MPI_ANY_TAG: any, in each sender's order) if one has
  // arrived (under the MPI lock).
  std::optional<ControlMessage> take_control(int tag) {
    int flag = 0;
    MPI_Status status;
    check(MPI_Iprobe(MPI_ANY_SOURCE, tag, control_, &flag, &status), "MPI_Iprobe");
    if (flag == 0) return std::nullopt;
    int count = 0;
    MPI_Get_count(&status, MPI_LONG_LONG, &count);
    ControlMessage m{status.MPI_SOURCE, status.MPI_TAG,
                     std::vector<long long>(static_cast<std::size_t>(count))};
    check(MPI_Recv(m.words.data(), count, MPI_LONG_LONG, m.source, m.tag, control_,
                   MPI_STATUS_IGNORE),
          "MPI_Recv");
    return m;
  }

  // Destroying the World: tells every other process how many runs this one made, then takes
  // in (and drops) whatever they send until each has said the same. A process still running a
  // run this one did not make so fails it (its receives from here and its sends not yet under
  // way fail, its barriers fail, its end of the run leaves this process out) instead of
  // waiting, and its sends already under way complete. Each process's last messages, one on
  // each communicator behind everything else it sent there, tell that nothing more comes: no
  // message is left in flight to a communicator that is freed.
  void close() {
    const long long runs = run_;
    std::vector<MPI_Request> sends(static_cast<std::size_t>(3 * (size_ - 1)), MPI_REQUEST_NULL);
    {
      std::lock_guard lock(mpi_lock());
      std::size_t k = 0;
      for (int p = 0; p < size_; ++p) {
        if (p == rank_) continue;
        check(MPI_Isend(&runs, 1, MPI_LONG_LONG, p, kCloseTag, control_, &sends[k++]), "MPI_Isend");
        check(MPI_Isend(&runs, 1, MPI_LONG_LONG, p, kLastTag, control_, &sends[k++]), "MPI_Isend");
        check(MPI_Isend(&runs, 1, MPI_LONG_LONG, p, last_data_tag(), data_, &sends[k++]),
              "MPI_Isend");
      }
    }
    std::vector<std::string> dropped;
    const auto start = std::chrono::steady_clock::now();
    bool said = false;
    for (;;) {
      {
        std::lock_guard lock(mpi_lock());
        take_control_in_order();
      }
      drain(dropped);
      dropped.clear();
      const std::string waiting = processes_not_closed();
      if (waiting.empty()) break;
      if (!said && std::chrono::steady_clock::now() - start > kCloseWarning) {
        std::fprintf(stderr,
                     "weft::stream::World (process %d): destroying the World waits for "
                     "process(es) %s to destroy theirs (every process destroys its Worlds, in "
                     "the same order)\n",
                     rank_, waiting.c_str());
        said = true;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    wait_all(sends);
  }
  static constexpr std::chrono::seconds kCloseWarning{10};

  // Takes in every control message that has arrived, in each sender's order (under the MPI
  // lock): a close is booked, a last message too, the rest (news of streams, barrier and end
  // arrivals no run of this World will wait for again) dropped.
  void take_control_in_order() {
    while (const auto message = take_control(MPI_ANY_TAG)) {
      if (message->tag == kCloseTag) book_close(message->source, message->words.at(0));
      if (message->tag == kLastTag) last_control_.insert(message->source);
    }
  }

  // The processes whose last messages have not both come, as "1, 3" (empty: none).
  [[nodiscard]] std::string processes_not_closed() const {
    std::string waiting;
    for (int p = 0; p < size_; ++p) {
      if (p == rank_ || (last_control_.contains(p) && last_data_.contains(p))) continue;
      waiting += (waiting.empty() ? "" : ", ") + std::to_string(p);
    }
    return waiting;
  }
  // The data tag of a process's last message: tag_ub_, above every channel's (max_user_tag).
  [[nodiscard]] int last_data_tag() const noexcept { return tag_ub_; }

  // Whether `process` destroyed its World before this run (under the news lock).
  [[nodiscard]] bool is_gone(int process) const {
    const auto it = closed_.find(process);
    return it != closed_.end() && it->second < run_;
  }
  // Its streams count as ended, having sent nothing and reached no barrier (under the news
  // lock).
  void mark_gone(int process) {
    for (int local = 0; local < streams_; ++local) {
      RemoteEnd& end = remote_[process * streams_ + local];
      end = RemoteEnd{};
      end.ended = true;
    }
  }
  // gone_text for `process` if its World is gone before this run, else empty.
  std::string gone_reason(int process) {
    std::lock_guard news(news_mutex_);
    return is_gone(process) ? gone_text(process) : std::string();
  }
  // Why `process` takes no part in this run (under the news lock; it closed).
  [[nodiscard]] std::string gone_text(int process) const {
    const long long runs = closed_.at(process);
    return "process " + std::to_string(process) + " destroyed its World after " +
           std::to_string(runs) + (runs == 1 ? " run" : " runs") + ", before run " +
           std::to_string(run_) + " (every process must call World::run as many times)";
  }
  // Why a receive from a remote stream fails: its stream ended without sending it, or its
  // process's World is gone.
  std::string no_message_text(const Operation& op) {
    const std::string gone = gone_reason(process_of(op.peer));
    return rank_name(op.self) + " waits for a message (tag " + std::to_string(op.tag) + ") from " +
           rank_name(op.peer) + ", " +
           (gone.empty() ? "which ended without sending it" : "whose " + gone);
  }

  // Every other process's streams have ended, and each message they sent here has been
  // received or drained.
  bool all_accounted(WorldCore& world) {
    std::lock_guard news(news_mutex_);
    for (int r = 0; r < size_ * streams_; ++r) {
      if (process_of(r) == rank_) continue;
      const auto it = remote_.find(r);
      if (it == remote_.end() || !it->second.ended) return false;
      for (const auto& [key, count] : it->second.sent) {
        const auto [to, tag] = key;
        if (process_of(to) != rank_) continue;
        const auto& headers = world.stream(local_of(to)).remote_headers;
        const auto got = headers.find({r, tag});
        const auto drained = drained_.find({r, to, tag});
        const std::uint64_t seen = (got == headers.end() ? 0 : got->second) +
                                   (drained == drained_.end() ? 0 : drained->second);
        if (seen < count) return false;
      }
    }
    return true;
  }

  MPI_Comm data_ = MPI_COMM_NULL;
  MPI_Comm control_ = MPI_COMM_NULL;
  long long run_ = 0;  // the runs begun
  int rank_ = 0;
  int size_ = 1;
  int tag_ub_ = 32767;
  bool cuda_aware_ = false;
  bool ipc_ = true;
  std::vector<bool> same_node_;
  std::size_t chunk_ = 4u << 20;
  int streams_ = 1;
  WorldCore* world_ = nullptr;
  std::vector<void*> pool_;             // free pinned slots (under the MPI lock)
  std::vector<Header*> header_blocks_;  // pinned, kHeadersPerBlock headers each
  std::vector<Header*> free_headers_;   // (under the MPI lock)
  std::mutex news_mutex_;
  std::map<int, RemoteEnd> remote_;
  std::map<int, long long> closed_;  // process -> the runs it made before destroying its World
  // Processes whose last control / data message has come (the thread that runs and destroys
  // the World only: drain, close).
  std::set<int> last_control_;
  std::set<int> last_data_;
  std::map<std::tuple<int, int, int>, std::uint64_t> drained_;  // (from, to, tag) -> messages
};

}  // namespace

std::unique_ptr<MpiTransport> MpiTransport::create(MpiUse use) {
  if (use == MpiUse::Off) return nullptr;
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (use == MpiUse::Auto && initialized == 0 && !launched_by_mpi()) return nullptr;
  return std::make_unique<MpiWorld>();
}

}  // namespace weft::stream::detail
