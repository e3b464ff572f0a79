#include "parallel/mpi_module.h"

#include <dlfcn.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace deepinfer::parallel {
namespace {

constexpr const char* kModuleName = "libdeepinfer_mpi.so";

std::string ExecutableDir() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : self.parent_path().string();
}

}  // namespace

int LauncherWorldSize() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    const char* value = std::getenv(name);
    if (value == nullptr) continue;
    int size = 0;
    const char* end = value + std::char_traits<char>::length(value);
    const auto [ptr, ec] = std::from_chars(value, end, size);
    if (ec == std::errc() && ptr == end && size >= 1 && size <= (1 << 20)) return size;
  }
  return 1;
}

Result<std::unique_ptr<Communicator>> OpenMpiCommunicator() {
  std::vector<std::string> candidates;
  if (const char* named = std::getenv("DEEPINFER_MPI_MODULE"); named != nullptr && *named != '\0') {
    candidates.push_back(named);
  } else {
    if (const std::string dir = ExecutableDir(); !dir.empty()) {
      candidates.push_back(dir + "/" + kModuleName);
      candidates.push_back(dir + "/../lib/" + kModuleName);
    }
    candidates.push_back(kModuleName);  // the loader's search path
  }
  std::string errors;
  void* handle = nullptr;
  for (const std::string& path : candidates) {
    if (path.find('/') != std::string::npos && !std::filesystem::exists(path)) {
      errors += (errors.empty() ? "" : "; ") + path + ": not found";
      continue;
    }
    // RTLD_GLOBAL: Open MPI's own plugins, which it loads later, resolve libmpi's symbols through it.
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (handle != nullptr) break;
    const char* why = dlerror();
    errors += (errors.empty() ? "" : "; ") + std::string(why != nullptr ? why : path + ": cannot be loaded");
  }
  if (handle == nullptr)
    return Status::Unavailable("MPI is not available (" + errors +
                               "); install Open MPI (libopenmpi-dev openmpi-bin) and build deepinfer's MPI module");
  auto open = reinterpret_cast<OpenCommunicatorFn>(dlsym(handle, kOpenCommunicatorSymbol));
  if (open == nullptr) return Status::Unavailable(std::string(kModuleName) + " has no " + kOpenCommunicatorSymbol);
  std::string error;
  Communicator* communicator = open(&error);
  if (communicator == nullptr) return Status::Unavailable("MPI: " + error);
  // The module stays loaded for the life of the process (MPI cannot be initialised twice anyway).
  return std::unique_ptr<Communicator>(communicator);
}

}  // namespace deepinfer::parallel
