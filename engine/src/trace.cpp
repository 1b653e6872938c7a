// Chrome trace JSON (chrome://tracing, Perfetto) from the executor's step events.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "tfpin/engine/runtime.hpp"

namespace tfpin::engine {

std::string chrome_trace_json(const std::vector<TraceEvent>& events) {
  nlohmann::json trace_events = nlohmann::json::array();
  // Name each lane thread once (Chrome/Perfetto show "lane 0", "lane 1" instead of bare ids).
  std::vector<std::pair<int, unsigned>> threads;
  for (const TraceEvent& e : events) {
    const std::pair<int, unsigned> thread{e.thread, e.lane};
    if (std::find(threads.begin(), threads.end(), thread) != threads.end()) continue;
    threads.push_back(thread);
    trace_events.push_back({{"name", "thread_name"},
                            {"ph", "M"},
                            {"pid", 1},
                            {"tid", e.thread},
                            {"args", {{"name", "lane " + std::to_string(e.lane)}}}});
  }
  for (const TraceEvent& e : events) {
    trace_events.push_back(
        {{"name", e.name},
         {"cat", e.op},
         {"ph", "X"},
         {"ts", e.start_us},
         {"dur", e.duration_us},
         {"pid", 1},
         {"tid", e.thread},
         {"args",
          {{"lane", e.lane}, {"thread", e.thread}, {"threads", e.threads}, {"run", e.run}}}});
  }
  const nlohmann::json trace = {{"traceEvents", std::move(trace_events)},
                                {"displayTimeUnit", "ms"}};
  // Names are the user's node names: replace bytes that are not UTF-8 rather than throw.
  return trace.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace tfpin::engine
