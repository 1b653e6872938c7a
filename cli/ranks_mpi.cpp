// libtfpin-mpi.so: the ranks of an MPI job (Open MPI), loaded by tfpin on demand (mpi_module.hpp).
// Collectives are non-blocking requests polled with short sleeps: a rank waiting for slower peers
// then leaves its core to the compute threads (a blocking Open MPI call spins), and every wait can
// give up after the stall timeout.
#include <fmt/format.h>
// C API only: Open MPI would also pull in its deprecated C++ bindings.
#define OMPI_SKIP_MPICXX 1
#include <mpi.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string_view>
#include <thread>

#include "exit_codes.hpp"
#include "mpi_module.hpp"
#include "ranks.hpp"

namespace tfpin::cli {

namespace {

using Clock = std::chrono::steady_clock;

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<std::size_t>(length));
}

// Ends the process when a collective (or MPI_Init) outlives the stall timeout, from a thread of
// its own: a thread can be stuck inside Open MPI itself (after a peer's connection was reset, its
// error path waits on the runtime), where no polling loop would ever see the clock. It writes with
// write(2) and no stdio, whose locks the stuck threads may hold.
class Watchdog {
 public:
  explicit Watchdog(double seconds) : seconds_(seconds) {
    if (seconds_ > 0) thread_ = std::thread([this] { watch(); });
  }
  ~Watchdog() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void set_who(std::string who) {
    std::lock_guard lock(mutex_);
    who_ = std::move(who);
  }

  // While alive, `what` must finish within the stall timeout.
  class Guard {
   public:
    Guard(Watchdog& dog, std::string what) : dog_(dog) {
      if (dog_.seconds_ <= 0) return;
      std::lock_guard lock(dog_.mutex_);
      id_ = ++dog_.next_id_;
      dog_.armed_[id_] = {Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(dog_.seconds_)),
                          std::move(what)};
      dog_.cv_.notify_all();
    }
    ~Guard() {
      if (id_ == 0) return;
      std::lock_guard lock(dog_.mutex_);
      dog_.armed_.erase(id_);
    }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    Watchdog& dog_;
    std::uint64_t id_ = 0;
  };

 private:
  struct Armed {
    Clock::time_point deadline;
    std::string what;
  };

  void watch() {
    std::unique_lock lock(mutex_);
    while (!stop_) {
      if (armed_.empty()) {
        cv_.wait(lock);
        continue;
      }
      auto first = armed_.begin();
      for (auto it = armed_.begin(); it != armed_.end(); ++it) {
        if (it->second.deadline < first->second.deadline) first = it;
      }
      if (Clock::now() < first->second.deadline) {
        cv_.wait_until(lock, first->second.deadline);
        continue;
      }
      const std::string text = fmt::format(
          "tfpin bench: {}{}{}: no answer from the other ranks for {} s (--stall_timeout): a "
          "rank has died or stopped; ending the job\n",
          who_, who_.empty() ? "" : ": ", first->second.what, seconds_);
      ssize_t ignored = ::write(STDERR_FILENO, text.data(), text.size());
      (void)ignored;
      std::_Exit(exit_failure);
    }
  }

  double seconds_;
  std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::string who_;
  std::uint64_t next_id_ = 0;
  std::map<std::uint64_t, Armed> armed_;
  std::thread thread_;
};

// Waits for `request` under the watchdog; empty on success, else the MPI error.
std::string wait_bounded(Watchdog& watchdog, MPI_Request& request, const char* what) {
  const Watchdog::Guard guard(watchdog, what);
  for (unsigned polls = 0;; ++polls) {
    int done = 0;
    const int rc = MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return fmt::format("{} failed: {}", what, mpi_error_text(rc));
    if (done != 0) return {};
    // A few hundred quick polls for the short collectives, then 50 us sleeps.
    if (polls > 200) {
      const timespec pause{0, 50 * 1000};
      nanosleep(&pause, nullptr);
    }
  }
}

class MpiReducer final : public engine::GradientReducer {
 public:
  MpiReducer(MPI_Comm comm, Watchdog& watchdog) : comm_(comm), watchdog_(watchdog) {}
  engine::Status sum(std::span<float> data) override {
    // Counts are ints: very large buckets go in pieces.
    constexpr std::size_t piece = std::size_t{1} << 30;
    for (std::size_t done = 0; done < data.size(); done += piece) {
      const auto count = static_cast<int>(std::min(piece, data.size() - done));
      MPI_Request request = MPI_REQUEST_NULL;
      const int rc = MPI_Iallreduce(MPI_IN_PLACE, data.data() + done, count, MPI_FLOAT, MPI_SUM,
                                    comm_, &request);
      if (rc != MPI_SUCCESS) {
        return {engine::StatusCode::runtime_error,
                fmt::format("MPI_Iallreduce: {}", mpi_error_text(rc))};
      }
      std::string error = wait_bounded(watchdog_, request, "the gradient allreduce");
      if (!error.empty()) return {engine::StatusCode::runtime_error, error};
    }
    return {};
  }

 private:
  MPI_Comm comm_;
  Watchdog& watchdog_;
};

class MpiJob final : public Ranks {
 public:
  explicit MpiJob(double stall_seconds) : watchdog_(stall_seconds) {
    int provided = MPI_THREAD_SINGLE;
    {
      // A launcher without MPI wire-up, or ranks that never start, would block it.
      const Watchdog::Guard guard(watchdog_, "MPI_Init (launch with srun --mpi=pmix)");
      if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
        end_process("", "MPI_Init failed", exit_failure);
      }
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    // Slurm's simulated nodes share one host name: the node Slurm says is more telling.
    if (const char* slurm_node = std::getenv("SLURMD_NODENAME"); slurm_node != nullptr) {
      node_ = slurm_node;
    } else {
      char name[MPI_MAX_PROCESSOR_NAME] = {};
      int length = 0;
      MPI_Get_processor_name(name, &length);
      node_.assign(name, static_cast<std::size_t>(length));
    }
    watchdog_.set_who(who());
    if (provided < MPI_THREAD_SERIALIZED) {
      end_process(who(),
                  "the MPI library does not offer MPI_THREAD_SERIALIZED, which the communication "
                  "thread needs",
                  exit_failure);
    }
    // Errors come back as codes (reported by the rank that saw them), and the gradients have a
    // communicator of their own so they can never match one of the main thread's collectives.
    MPI_Comm_dup(MPI_COMM_WORLD, &control_);
    MPI_Comm_dup(MPI_COMM_WORLD, &gradients_);
    MPI_Comm_set_errhandler(control_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(gradients_, MPI_ERRORS_RETURN);
  }

  ~MpiJob() override { leave(); }
  MpiJob(const MpiJob&) = delete;
  MpiJob& operator=(const MpiJob&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string node() const override { return node_; }

  std::vector<std::string> allgather(const std::string& mine) override {
    const std::vector<double> lengths = allgather(static_cast<double>(mine.size()));
    std::vector<int> counts;
    std::vector<int> offsets;
    int total = 0;
    for (double length : lengths) {
      offsets.push_back(total);
      counts.push_back(static_cast<int>(length));
      total += counts.back();
    }
    std::string all(static_cast<std::size_t>(total), '\0');
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Iallgatherv(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, all.data(),
                          counts.data(), offsets.data(), MPI_CHAR, control_, &request),
          request, "gathering the ranks' settings");
    std::vector<std::string> out;
    for (std::size_t r = 0; r < counts.size(); ++r) {
      out.push_back(
          all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(counts[r])));
    }
    return out;
  }

  std::vector<double> allgather(double mine) override {
    std::vector<double> all(static_cast<std::size_t>(size_));
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Iallgather(&mine, 1, MPI_DOUBLE, all.data(), 1, MPI_DOUBLE, control_, &request),
          request, "gathering the ranks' figures");
    return all;
  }

  double sum(double mine) override {
    double total = 0;
    MPI_Request request = MPI_REQUEST_NULL;
    check(MPI_Iallreduce(&mine, &total, 1, MPI_DOUBLE, MPI_SUM, control_, &request), request,
          "summing over the ranks");
    return total;
  }

  std::shared_ptr<engine::GradientReducer> gradient_reducer() override {
    return std::make_shared<MpiReducer>(gradients_, watchdog_);
  }

  [[noreturn]] void abort(const std::string& message, int exit_code) override {
    end_process(who(), message, exit_code);
  }

  [[noreturn]] void end_together(const std::string& message, int exit_code) override {
    if (!message.empty()) print_reason(who(), message);
    leave();
    std::fflush(stdout);
    std::_Exit(exit_code);
  }

 private:
  void leave() {
    // A last bounded barrier: MPI_Finalize would wait forever for a rank that is gone.
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Ibarrier(control_, &request);
    std::string error = wait_bounded(watchdog_, request, "the final barrier");
    if (!error.empty()) end_process(who(), error, exit_failure);
    MPI_Comm_free(&gradients_);
    MPI_Comm_free(&control_);
    MPI_Finalize();
  }

  void check(int rc, MPI_Request& request, const char* what) {
    if (rc != MPI_SUCCESS)
      end_process(who(), fmt::format("{} failed: {}", what, mpi_error_text(rc)), 1);
    std::string error = wait_bounded(watchdog_, request, what);
    if (!error.empty()) end_process(who(), error, exit_failure);
  }

  Watchdog watchdog_;
  int rank_ = 0;
  int size_ = 1;
  std::string node_;
  MPI_Comm control_ = MPI_COMM_NULL;
  MPI_Comm gradients_ = MPI_COMM_NULL;
};

}  // namespace

}  // namespace tfpin::cli

// The module's only exported symbols (the rest is hidden). Nothing may throw across them.
#define TFPIN_MPI_EXPORT extern "C" __attribute__((visibility("default")))

TFPIN_MPI_EXPORT int tfpin_mpi_interface() { return TFPIN_MPI_MODULE_INTERFACE; }

TFPIN_MPI_EXPORT void tfpin_mpi_library_version(char* out, std::size_t size) {
  if (size == 0) return;
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int length = 0;
  std::string_view version = "MPI (version unknown)";
  if (MPI_Get_library_version(text, &length) == MPI_SUCCESS) {
    version = std::string_view(text, static_cast<std::size_t>(length));
    version = version.substr(0, version.find(','));
  }
  const std::size_t copied = std::min(version.size(), size - 1);
  version.copy(out, copied);
  out[copied] = '\0';
}

TFPIN_MPI_EXPORT tfpin::cli::Ranks* tfpin_mpi_join_job(double stall_seconds) {
  try {
    return new tfpin::cli::MpiJob(stall_seconds);
  } catch (const std::exception& error) {
    tfpin::cli::end_process("", fmt::format("joining the MPI job: {}", error.what()),
                            tfpin::cli::exit_failure);
  }
}
