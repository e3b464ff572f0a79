// The collectives a parallel unit needs, without MPI: the members' ranks, and an all-to-all of bytes with
// a deadline. The MPI implementation lives in a module of its own (mpi/, libdeepinfer_mpi.so, linked to
// libmpi) that mpi_module.h loads at run time, so that a deepinfer that never runs in parallel neither
// needs nor loads MPI.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "core/status.h"

namespace deepinfer::parallel {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Every member calls it in the same order: send_bytes[p] bytes of `send` (the parts in rank order) go to
  // member p, recv_bytes[p] bytes from member p land in `recv` (in rank order); both sides must agree on
  // every size. Fails with kDeadlineExceeded, naming the members it still waits for, when it has not
  // completed within timeout_s seconds (a member stopped, dead or far behind); the collective cannot be
  // resumed after that.
  virtual Status AllToAllV(const uint8_t* send, std::span<const int64_t> send_bytes, uint8_t* recv,
                           std::span<const int64_t> recv_bytes, double timeout_s) = 0;
  // The same all-to-all, and where this member would first wait for its peers, having moved every byte it
  // could, it runs `*idle_work` (work of its own that the exchange does not need) and empties it, so that the
  // wait does something useful; a member that never waits leaves it for the caller. Its time does not count
  // against timeout_s. By default the exchange alone.
  virtual Status AllToAllVWithIdleWork(const uint8_t* send, std::span<const int64_t> send_bytes, uint8_t* recv,
                                       std::span<const int64_t> recv_bytes, double timeout_s,
                                       std::function<void()>* idle_work) {
    (void)idle_work;
    return AllToAllV(send, send_bytes, recv, recv_bytes, timeout_s);
  }
  // Ends every member's process with `code` (MPI_Abort): how a unit stops when one member fails.
  [[noreturn]] virtual void Abort(int code) = 0;
  // What carries the bytes, for the unit's figures.
  virtual const char* transport() const { return "MPI"; }
};

// The entry point the MPI module exports (extern "C"): initialises MPI and returns its communicator over
// all members, or null with `error` set.
using OpenCommunicatorFn = Communicator* (*)(std::string* error);
inline constexpr const char* kOpenCommunicatorSymbol = "deepinfer_open_mpi_communicator";

}  // namespace deepinfer::parallel
