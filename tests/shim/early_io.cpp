// A library whose global object does file I/O in its constructor, which runs before the shim's own
// (the program's libraries are initialised first): it writes a file with std::ofstream (libstdc++
// opens it with fopen "w") and lists its directory with readdir. Defect: before the shim had
// resolved the C library, those hooks failed (ENOSYS, an empty listing).
#include <dirent.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace {

struct EarlyIo {
  std::string result = "not run";
  EarlyIo() {
    const char* dir = std::getenv("EARLY_IO_DIR");
    if (dir == nullptr) return;
    const std::string file = std::string(dir) + "/written-by-constructor.txt";
    std::ofstream out(file);
    out << "written\n";
    out.close();
    result = out ? "ofstream=ok" : std::string("ofstream=failed:") + std::strerror(errno);
    int seen = 0;
    DIR* listing = opendir(dir);
    if (listing != nullptr) {
      while (const dirent* entry = readdir(listing)) {
        if (std::strcmp(entry->d_name, "written-by-constructor.txt") == 0) ++seen;
      }
      closedir(listing);
    }
    result += " listed=" + std::to_string(seen);
  }
};
EarlyIo early_io;

}  // namespace

__attribute__((visibility("default"))) const char* early_io_result() {
  return early_io.result.c_str();
}
