#include "parallel/build_id.h"

#include <elf.h>
#include <link.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string_view>
#include <vector>

#include "core/hash.h"

namespace deepinfer::parallel {
namespace {

constexpr char kGnuNoteName[] = "GNU";  // the owner of NT_GNU_BUILD_ID notes

std::string Hex(const uint8_t* bytes, size_t size) {
  std::string out;
  out.reserve(2 * size);
  char buf[3];
  for (size_t i = 0; i < size; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", bytes[i]);
    out += buf;
  }
  return out;
}

// The build-id note among the main program's loaded note segments (the first object dl_iterate_phdr visits).
int FindBuildIdNote(dl_phdr_info* info, size_t /*size*/, void* data) {
  auto* out = static_cast<std::string*>(data);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& segment = info->dlpi_phdr[i];
    if (segment.p_type != PT_NOTE) continue;
    const auto* at = reinterpret_cast<const uint8_t*>(info->dlpi_addr + segment.p_vaddr);
    const uint8_t* end = at + segment.p_memsz;
    while (at + sizeof(ElfW(Nhdr)) <= end) {
      const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(at);
      // Name and description are each padded to 4 bytes.
      const size_t name_size = (note->n_namesz + 3u) & ~size_t{3};
      const size_t desc_size = (note->n_descsz + 3u) & ~size_t{3};
      const uint8_t* name = at + sizeof(ElfW(Nhdr));
      const uint8_t* desc = name + name_size;
      if (desc + desc_size > end) break;
      if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == sizeof kGnuNoteName &&
          std::string_view(reinterpret_cast<const char*>(name), sizeof kGnuNoteName) ==
              std::string_view(kGnuNoteName, sizeof kGnuNoteName)) {
        *out = Hex(desc, note->n_descsz);
        return 1;
      }
      at = desc + desc_size;
    }
  }
  return 1;  // only the main program
}

std::string HashOfExecutableFile() {
  std::ifstream in("/proc/self/exe", std::ios::binary);
  Hasher128 h;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.Update(buf.data(), static_cast<size_t>(in.gcount()));
  }
  return "file:" + h.Digest().ToHex();
}

}  // namespace

const std::string& ExecutableBuildId() {
  static const std::string id = [] {
    std::string found;
    dl_iterate_phdr(FindBuildIdNote, &found);
    return found.empty() ? HashOfExecutableFile() : found;
  }();
  return id;
}

}  // namespace deepinfer::parallel
