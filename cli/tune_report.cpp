// `tfpin tune`'s renderings of a finished sweep: the table, terminal bars, the recommendation with
// its #SBATCH lines, JSON and an SVG plot (hand-written: no plotting dependency for one chart).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "bench.hpp"
#include "tfpin/cpulist.hpp"
#include "tune.hpp"

namespace tfpin::cli {

namespace {

std::string config_label(const TuneConfig& config) {
  return fmt::format("{} thr, {} inter-op{}", config.plan.threads, config.plan.interop,
                     config.streams > 1 ? fmt::format(", {} streams", config.streams) : "");
}

// The fastest of all runs, streams or not: the scale of the bars and the plot.
double top_rate(const TuneSweep& sweep) {
  double top = 0;
  for (const TuneResult& r : sweep.results) {
    if (r.ok) top = std::max(top, r.images_per_sec);
  }
  return top;
}

bool has_streams(const TuneSweep& sweep) {
  return std::any_of(sweep.configs.begin(), sweep.configs.end(),
                     [](const TuneConfig& c) { return c.streams > 1; });
}

double best_rate(const TuneSweep& sweep) {
  const std::ptrdiff_t best = best_result(sweep);
  return best < 0 ? 0.0 : sweep.results[static_cast<std::size_t>(best)].images_per_sec;
}

// The step spread tf_cnn_benchmarks prints: +/- standard error, and jitter.
std::string spread_text(const TuneResult& r) {
  const nlohmann::json& s = r.child.value("step_images_per_sec", nlohmann::json::object());
  if (!s.contains("uncertainty")) return "";
  return fmt::format("+/- {:.1f} (jitter {:.1f})", s["uncertainty"].get<double>(),
                     s.value("jitter", 0.0));
}

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// 1, 2 or 5 times a power of ten, so that about `ticks` steps cover `max`.
double nice_step(double max, int ticks) {
  const double raw = max / ticks;
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

}  // namespace

std::vector<std::vector<unsigned>> lane_cpus(const Plan& plan) {
  std::vector<std::vector<unsigned>> lanes;
  for (const Lane& lane : plan.lanes) lanes.push_back(lane.cpus);
  return lanes;
}

std::string lanes_text(const Plan& plan) { return lanes_text(lane_cpus(plan)); }

namespace {

// The fastest run among the one-request layouts (streams == false) or the streams ones.
std::ptrdiff_t fastest(const TuneSweep& sweep, bool streams) {
  std::ptrdiff_t best = -1;
  for (std::size_t i = 0; i < sweep.results.size(); ++i) {
    const TuneResult& r = sweep.results[i];
    if ((sweep.configs[r.config].streams > 1) != streams) continue;
    if (r.ok && (best < 0 ||
                 r.images_per_sec > sweep.results[static_cast<std::size_t>(best)].images_per_sec)) {
      best = static_cast<std::ptrdiff_t>(i);
    }
  }
  return best;
}

}  // namespace

// Streams run several requests at once: their images/sec is throughput, not what one job's
// layout gives, so the recommended layout is chosen among the others.
std::ptrdiff_t best_result(const TuneSweep& sweep) { return fastest(sweep, false); }
std::ptrdiff_t best_streams_result(const TuneSweep& sweep) { return fastest(sweep, true); }

std::string tune_table(const TuneSweep& sweep) {
  const double best = best_rate(sweep);
  const bool streams = has_streams(sweep);
  std::string out = fmt::format("{:>7}  {:>7}  {:>5}  {}{:>6}  {:>10}  {:>7}  {:<26}  {}\n",
                                "threads", "interop", "intra", streams ? "streams  " : "", "batch",
                                "images/sec", "vs best", "step spread", "lanes");
  for (const TuneResult& r : sweep.results) {
    const TuneConfig& config = sweep.configs[r.config];
    const Plan& plan = config.plan;
    out += fmt::format("{:>7}  {:>7}  {:>5}  {}{:>6}  ", plan.threads, plan.interop, plan.intra,
                       streams ? fmt::format("{:>7}  ", config.streams) : "", r.batch);
    if (r.ok) {
      out += fmt::format("{:>10.1f}  {:>6.1f}%  {:<26}  {}\n", r.images_per_sec,
                         100.0 * r.images_per_sec / best, spread_text(r), lanes_text(plan));
    } else {
      out += fmt::format("{:>10}  {:>7}  {}\n", "FAILED", "", r.error);
    }
  }
  return out;
}

std::string tune_bars(const TuneSweep& sweep, unsigned width) {
  const double best = best_rate(sweep);
  const double scale = top_rate(sweep);
  if (scale <= 0) return "";
  std::string out = fmt::format("images/sec (# = {:.3g})\n", scale / width);
  unsigned batch = 0;
  for (const TuneResult& r : sweep.results) {
    if (r.batch != batch || &r == &sweep.results.front()) {
      batch = r.batch;
      out += fmt::format("batch {}\n", batch);
    }
    const std::string label = config_label(sweep.configs[r.config]);
    if (!r.ok) {
      out += fmt::format("  {:<28}|{:<{}}  failed\n", label, "", width);
      continue;
    }
    const auto n = static_cast<unsigned>(std::lround(width * r.images_per_sec / scale));
    out += fmt::format("  {:<28}|{:<{}}  {:.1f}{}\n", label, std::string(n, '#'), width,
                       r.images_per_sec, r.images_per_sec == best ? "  <- best" : "");
  }
  return out;
}

std::string tune_recommendation(const TuneSweep& sweep) {
  const std::ptrdiff_t index = best_result(sweep);
  if (index < 0) return "No configuration could be measured: see the FAILED rows above.\n";
  const TuneResult& best = sweep.results[static_cast<std::size_t>(index)];
  const Plan& plan = sweep.configs[best.config].plan;
  std::string out = fmt::format(
      "Best: {} thread{} = {} inter-op lane{} x {} intra-op thread{}, batch {}: {:.1f} "
      "images/sec\n",
      plan.threads, plan.threads == 1 ? "" : "s", plan.interop, plan.interop == 1 ? "" : "s",
      plan.intra, plan.intra == 1 ? "" : "s", best.batch, best.images_per_sec);
  for (unsigned batch : sweep.batches) {
    const TuneResult* top = nullptr;
    for (const TuneResult& r : sweep.results) {
      if (r.ok && r.batch == batch && sweep.configs[r.config].streams == 1 &&
          (top == nullptr || r.images_per_sec > top->images_per_sec))
        top = &r;
    }
    if (top != nullptr && batch != best.batch) {
      out += fmt::format("  best at batch {}: {} ({:.1f} images/sec)\n", batch,
                         config_label(sweep.configs[top->config]), top->images_per_sec);
    }
  }
  const std::size_t failed = static_cast<std::size_t>(std::count_if(
      sweep.results.begin(), sweep.results.end(), [](const TuneResult& r) { return !r.ok; }));
  if (failed > 0) out += fmt::format("({} of {} runs failed)\n", failed, sweep.results.size());
  out += "\nFor the job script:\n";
  for (const std::string& line : sbatch_lines(plan, sweep.smt)) out += line + "\n";
  out += fmt::format("# batch size {} (e.g. tfpin bench --model {} --batch_size {})\n", best.batch,
                     sweep.workload.model, best.batch);
  if (const std::ptrdiff_t s = best_streams_result(sweep); s >= 0) {
    const TuneResult& served = sweep.results[static_cast<std::size_t>(s)];
    const TuneConfig& config = sweep.configs[served.config];
    out += fmt::format(
        "\nServing many independent requests: {} streams x {} thread{} (one request per lane, "
        "batch {}): {:.1f} images/sec, {:.2f}x the best one-request layout\n"
        "# tfpin bench --model {} --forward_only --batch_size {} --num_streams {}\n",
        config.streams, config.plan.intra, config.plan.intra == 1 ? "" : "s", served.batch,
        served.images_per_sec, served.images_per_sec / best.images_per_sec, sweep.workload.model,
        served.batch, config.streams);
  }
  return out;
}

std::vector<std::string> sbatch_lines(const Plan& plan, bool smt) {
  std::vector<std::string> lines = {fmt::format("#SBATCH --cpus-per-task={}", plan.threads)};
  // cpus-per-task counts hardware threads; one thread per core is what was measured.
  if (smt) lines.emplace_back("#SBATCH --hint=nomultithread");
  lines.push_back(fmt::format("#SBATCH --tf-threads={}", plan.threads));
  lines.push_back(fmt::format("#SBATCH --tf-interop={}", plan.interop));
  return lines;
}

nlohmann::json tune_json(const TuneSweep& sweep) {
  nlohmann::json j;
  j["model"] = sweep.workload.model;
  j["data_format"] = sweep.workload.data_format;
  j["forward_only"] = sweep.workload.forward_only;
  j["mode"] = sweep.workload.forward_only ? "inference" : "training";
  j["num_batches"] = sweep.num_batches;
  j["num_warmup_batches"] = sweep.num_warmup_batches;
  j["allowed"] = format_cpulist(sweep.allowed);
  j["cores"] = sweep.cores;
  j["batch_sizes"] = sweep.batches;
  j["configurations"] = nlohmann::json::array();
  for (const TuneConfig& c : sweep.configs) {
    nlohmann::json lanes = nlohmann::json::array();
    for (const Lane& lane : c.plan.lanes) lanes.push_back(lane.cpus);
    j["configurations"].push_back({{"threads", c.plan.threads},
                                   {"interop", c.plan.interop},
                                   {"intra", c.plan.intra},
                                   {"streams", c.streams},
                                   {"lanes", lanes}});
  }
  const double top = best_rate(sweep);
  j["results"] = nlohmann::json::array();
  for (const TuneResult& r : sweep.results) {
    const Plan& plan = sweep.configs[r.config].plan;
    nlohmann::json row = {{"threads", plan.threads}, {"interop", plan.interop},
                          {"intra", plan.intra},     {"streams", sweep.configs[r.config].streams},
                          {"batch_size", r.batch},   {"status", r.ok ? "ok" : "failed"},
                          {"seconds", r.seconds}};
    if (r.ok) {
      row["images_per_sec"] = r.images_per_sec;
      row["relative"] = r.images_per_sec / top;
      row["step_images_per_sec"] = r.child.value("step_images_per_sec", nlohmann::json::object());
    } else {
      row["error"] = r.error;
    }
    // What the child itself reported: its lanes and the kernel's CPU mask (proof of the pinning).
    if (r.child.is_object()) {
      row["child"] = nlohmann::json::object();
      for (const char* key : {"lanes", "cpus_allowed", "intra", "interop", "intra_source",
                              "interop_source", "num_streams", "streams"}) {
        if (r.child.contains(key)) row["child"][key] = r.child[key];
      }
    }
    j["results"].push_back(row);
  }
  const std::ptrdiff_t index = best_result(sweep);
  if (index >= 0) {
    const TuneResult& best = sweep.results[static_cast<std::size_t>(index)];
    const Plan& plan = sweep.configs[best.config].plan;
    j["best"] = {{"threads", plan.threads},
                 {"interop", plan.interop},
                 {"intra", plan.intra},
                 {"batch_size", best.batch},
                 {"images_per_sec", best.images_per_sec}};
    j["sbatch"] = sbatch_lines(plan, sweep.smt);
  } else {
    j["best"] = nullptr;
    j["sbatch"] = nlohmann::json::array();
  }
  if (const std::ptrdiff_t s = best_streams_result(sweep); s >= 0) {
    const TuneResult& served = sweep.results[static_cast<std::size_t>(s)];
    const TuneConfig& config = sweep.configs[served.config];
    j["best_streams"] = {{"threads", config.plan.threads},
                         {"streams", config.streams},
                         {"intra", config.plan.intra},
                         {"batch_size", served.batch},
                         {"images_per_sec", served.images_per_sec}};
  }
  return j;
}

std::string tune_svg(const TuneSweep& sweep) {
  static constexpr const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                           "#9467bd", "#8c564b", "#e377c2", "#17becf"};
  const double left = 70, right = 150, top = 40, bottom = 60, plot_h = 300;
  const double step_x = 90;
  const double plot_w = std::max(240.0, step_x * static_cast<double>(sweep.configs.size()));
  const double width = left + plot_w + right, height = top + plot_h + bottom;
  double max_rate = 0;
  for (const TuneResult& r : sweep.results) {
    if (r.ok) max_rate = std::max(max_rate, r.images_per_sec);
  }
  const double tick = max_rate > 0 ? nice_step(max_rate, 5) : 1;
  const double y_max = tick * std::ceil(std::max(max_rate, tick) / tick);
  auto x_of = [&](std::size_t config) {
    const auto n = static_cast<double>(std::max<std::size_t>(1, sweep.configs.size()));
    return left + plot_w * (static_cast<double>(config) + 0.5) / n;
  };
  auto y_of = [&](double rate) { return top + plot_h * (1 - rate / y_max); };

  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" "
      "viewBox=\"0 0 {0:.0f} {1:.0f}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<title>tfpin tune: {2} images/sec</title>\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{3:.0f}\" y=\"24\" font-size=\"15\">tfpin tune: {2}, {4}, CPUs {5} — images/sec "
      "per configuration</text>\n",
      width, height, xml_escape(sweep.workload.model), left, xml_escape(sweep.workload.data_format),
      format_cpulist(sweep.allowed));
  out += "<g class=\"axes\" stroke=\"#999\">\n";
  for (double v = 0; v <= y_max + tick / 2; v += tick) {
    out += fmt::format(
        "<line x1=\"{0:.1f}\" x2=\"{1:.1f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke-opacity=\"0.3\"/>"
        "<text x=\"{3:.1f}\" y=\"{4:.1f}\" text-anchor=\"end\" stroke=\"none\">{5:g}</text>\n",
        left, left + plot_w, y_of(v), left - 6, y_of(v) + 4, v);
  }
  out += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\"/>\n", left,
                     top, top + plot_h);
  for (std::size_t i = 0; i < sweep.configs.size(); ++i) {
    const Plan& p = sweep.configs[i].plan;
    const unsigned streams = sweep.configs[i].streams;
    out += fmt::format(
        "<text x=\"{0:.1f}\" y=\"{1:.1f}\" text-anchor=\"middle\" stroke=\"none\">{2} thr</text>"
        "<text x=\"{0:.1f}\" y=\"{3:.1f}\" text-anchor=\"middle\" stroke=\"none\">{4} "
        "{5}</text>\n",
        x_of(i), top + plot_h + 18, p.threads, top + plot_h + 33, streams > 1 ? streams : p.interop,
        streams > 1 ? "streams" : "inter-op");
  }
  out += fmt::format(
      "<text x=\"18\" y=\"{0:.1f}\" transform=\"rotate(-90 18 {0:.1f})\" text-anchor=\"middle\" "
      "stroke=\"none\">images/sec</text>\n</g>\n",
      top + plot_h / 2);

  const std::ptrdiff_t best = best_result(sweep);
  for (std::size_t b = 0; b < sweep.batches.size(); ++b) {
    const unsigned batch = sweep.batches[b];
    const char* color = colors[b % std::size(colors)];
    out += fmt::format("<g class=\"series\" data-batch-size=\"{}\" stroke=\"{}\" fill=\"{}\">\n",
                       batch, color, color);
    // A failed run breaks the line: no point is invented for it.
    std::string points;
    auto flush = [&] {
      if (!points.empty()) {
        out += fmt::format("<polyline fill=\"none\" stroke-width=\"2\" points=\"{}\"/>\n", points);
      }
      points.clear();
    };
    for (std::size_t i = 0; i < sweep.results.size(); ++i) {
      const TuneResult& r = sweep.results[i];
      if (r.batch != batch) continue;
      if (!r.ok) {
        flush();
        continue;
      }
      const double x = x_of(r.config), y = y_of(r.images_per_sec);
      points += fmt::format("{}{:.1f},{:.1f}", points.empty() ? "" : " ", x, y);
      out += fmt::format(
          "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\"><title>batch {}, {}: {:.1f} "
          "images/sec</title></circle>\n",
          x, y, static_cast<std::ptrdiff_t>(i) == best ? 6 : 4, batch,
          config_label(sweep.configs[r.config]), r.images_per_sec);
    }
    flush();
    out += "</g>\n";
    const double ly = top + 10 + 20 * static_cast<double>(b);
    out += fmt::format(
        "<g class=\"legend\"><line x1=\"{0:.1f}\" x2=\"{1:.1f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" "
        "stroke=\"{3}\" stroke-width=\"2\"/><text x=\"{4:.1f}\" y=\"{5:.1f}\">batch "
        "{6}</text></g>\n",
        left + plot_w + 15, left + plot_w + 40, ly, color, left + plot_w + 46, ly + 4, batch);
  }
  out += "</svg>\n";
  return out;
}

}  // namespace tfpin::cli
