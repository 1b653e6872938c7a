// Helpers shared by the shim probes: what the kernel really says about a thread's affinity
// (/proc, raw syscalls: never through the hooked libc functions), and tiny JSON output.
#pragma once

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace probe {

// "0-2,5" -> {0,1,2,5}
inline std::vector<int> parse_list(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    const auto dash = item.find('-');
    const int a = std::stoi(item.substr(0, dash));
    const int b = dash == std::string::npos ? a : std::stoi(item.substr(dash + 1));
    for (int c = a; c <= b; ++c) out.push_back(c);
  }
  return out;
}

// Cpus_allowed_list of a /proc status file.
inline std::vector<int> allowed_from(const std::string& status_path) {
  std::ifstream f(status_path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("Cpus_allowed_list:", 0) == 0) {
      const auto pos = line.find_first_not_of(" \t", line.find(':') + 1);
      return parse_list(pos == std::string::npos ? "" : line.substr(pos));
    }
  }
  return {};
}

inline std::vector<int> my_allowed() { return allowed_from("/proc/thread-self/status"); }

inline long gettid_raw() { return syscall(SYS_gettid); }

// The calling thread's real mask as the kernel reports it in /proc (libc's sched_getaffinity and
// even syscall() are hooked by the shim, /proc is not).
inline std::vector<int> raw_affinity() { return my_allowed(); }

inline std::string json(const std::vector<int>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

inline std::string json(const std::set<int>& v) {
  return json(std::vector<int>(v.begin(), v.end()));
}

inline std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

// Every thread of the process as the kernel sees it: [{"name":..,"allowed":[..]}, ...] sorted
// (tids differ between runs; names and masks do not).
inline std::string task_snapshot() {
  std::vector<std::string> items;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    const std::string dir = entry.path().string();
    std::ifstream comm(dir + "/comm");
    std::string name;
    std::getline(comm, name);
    items.push_back("{\"name\":" + quote(name) +
                    ",\"allowed\":" + json(allowed_from(dir + "/status")) + "}");
  }
  std::sort(items.begin(), items.end());
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? "," : "") + items[i];
  return out + "]";
}

#ifdef _OPENMP
// Runs `body` on one OpenMP team: num_threads(n), or no clause when n is 0 (the runtime's default
// team, which the shim caps).
template <typename Body>
void run_team(int n, Body&& body) {
  if (n > 0) {
#pragma omp parallel num_threads(n)
    body();
  } else {
#pragma omp parallel
    body();
  }
}
#endif

}  // namespace probe
