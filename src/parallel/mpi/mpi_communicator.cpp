// The MPI module (libdeepinfer_mpi.so): parallel::Communicator over MPI_COMM_WORLD. Each all-to-all is
// point-to-point non-blocking sends and receives polled until done or past the deadline, so a member that
// stopped or died is named instead of waited for forever. The polling sleeps between tests, growing to a
// millisecond, so waiting members leave the cores to the busy ones (units are often oversubscribed).
// The C API only: Open MPI and MPICH would otherwise pull in their deprecated C++ bindings, which the C
// library does not export.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "parallel/communicator.h"

namespace deepinfer::parallel {
namespace {

constexpr int kTag = 7301;

std::string MpiError(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<size_t>(std::max(length, 0)));
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(int rank, int size) : rank_(rank), size_(size) {}
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status AllToAllV(const uint8_t* send, std::span<const int64_t> send_bytes, uint8_t* recv,
                   std::span<const int64_t> recv_bytes, double timeout_s) override {
    if (static_cast<int>(send_bytes.size()) != size_ || static_cast<int>(recv_bytes.size()) != size_)
      return Status::InvalidArgument("all-to-all: one size per member expected");
    std::vector<MPI_Request> requests;
    std::vector<int> peer;      // the member of each request
    std::vector<bool> receive;  // whether it is a receive
    int64_t send_at = 0, recv_at = 0;
    auto fail = [&](Status s) {
      for (MPI_Request& r : requests) {
        if (r != MPI_REQUEST_NULL) MPI_Cancel(&r);
      }
      return s;
    };
    for (int p = 0; p < size_; ++p) {
      const int64_t out = send_bytes[p], in = recv_bytes[p];
      if (out < 0 || in < 0 || out > INT_MAX || in > INT_MAX)
        return fail(Status::OutOfRange("all-to-all: a part of " + std::to_string(std::max(out, in)) +
                                       " bytes is over MPI's 2^31 - 1"));
      if (p == rank_) {
        if (out != in) return fail(Status::InvalidArgument("all-to-all: this member's own part differs in size"));
        if (out > 0) std::memcpy(recv + recv_at, send + send_at, static_cast<size_t>(out));
      } else {
        if (in > 0) {
          requests.emplace_back();
          const int rc = MPI_Irecv(recv + recv_at, static_cast<int>(in), MPI_BYTE, p, kTag, MPI_COMM_WORLD, &requests.back());
          if (rc != MPI_SUCCESS) return fail(Status::Internal("MPI_Irecv: " + MpiError(rc)));
          peer.push_back(p);
          receive.push_back(true);
        }
        if (out > 0) {
          requests.emplace_back();
          const int rc = MPI_Isend(send + send_at, static_cast<int>(out), MPI_BYTE, p, kTag, MPI_COMM_WORLD,
                                   &requests.back());
          if (rc != MPI_SUCCESS) return fail(Status::Internal("MPI_Isend: " + MpiError(rc)));
          peer.push_back(p);
          receive.push_back(false);
        }
      }
      send_at += out;
      recv_at += in;
    }
    if (requests.empty()) return Status::Ok();
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                      std::chrono::duration<double>(timeout_s));
    std::chrono::microseconds pause{0};
    for (int tests = 0;; ++tests) {
      int done = 0;
      const int rc = MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE);
      if (rc != MPI_SUCCESS) return fail(Status::Internal("MPI_Testall: " + MpiError(rc)));
      if (done) return Status::Ok();
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) break;
      // A few quick tests first (a balanced exchange completes within microseconds), then sleeps that
      // grow to a millisecond.
      if (tests < 64) {
        std::this_thread::yield();
      } else {
        pause = std::min(std::chrono::microseconds(1000), pause + std::chrono::microseconds(20));
        std::this_thread::sleep_for(pause);
      }
    }
    // Which members it still waits for: those whose data has not arrived, else those not taking ours.
    std::string waiting_recv, waiting_send;
    for (size_t i = 0; i < requests.size(); ++i) {
      if (requests[i] == MPI_REQUEST_NULL) continue;
      int flag = 0;
      MPI_Request_get_status(requests[i], &flag, MPI_STATUS_IGNORE);
      if (flag) continue;
      std::string& list = receive[i] ? waiting_recv : waiting_send;
      const std::string name = std::to_string(peer[i]);
      if (list.find(" " + name + ",") == std::string::npos) list += " " + name + ",";
    }
    std::string who = !waiting_recv.empty() ? waiting_recv : waiting_send;
    if (!who.empty()) who.pop_back();
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%.1f", timeout_s);
    return fail(Status::DeadlineExceeded("rank" + who + " did not answer within " + seconds +
                                         " s (stopped, dead or stalled)"));
  }

  [[noreturn]] void Abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; if an implementation did, end this member anyway
  }

 private:
  int rank_, size_;
};

}  // namespace
}  // namespace deepinfer::parallel

extern "C" __attribute__((visibility("default"))) deepinfer::parallel::Communicator* deepinfer_open_mpi_communicator(
    std::string* error) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  // Serialized: the engine's step thread makes the collectives while the engine runs, the main thread
  // before and after, never two at once.
  if (!initialized) {
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) {
      *error = "MPI_Init_thread: " + deepinfer::parallel::MpiError(rc);
      return nullptr;
    }
  } else {
    MPI_Query_thread(&provided);
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    *error = "the MPI library does not allow calls from several threads (MPI_THREAD_SERIALIZED)";
    return nullptr;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return new deepinfer::parallel::MpiCommunicator(rank, size);
}
