// Ceph's dmclock queue (PullPriorityQueue) measured on the workloads of iosched's
// crates/core/benches/mclock.rs, so that the fq and mclock benches can be judged against
// dmclock measured in the same session on the same machine, not against figures from another
// day. Built by run.sh against a dmclock checkout you provide; nothing of dmclock is in this
// repository.
//
// A request's life as the benches see it: pull it (dispatch), the device completes it 10 us
// later, the client adds its next one. Clients: every other one has a reservation (together
// half the device), every one a weight from 1 to 4, every fourth a limit (twice its even
// share). Device: 100 000 IOPS. `backlogged`: every client always has two requests queued;
// `churn`: one at a time.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "dmclock_server.h"

namespace dmc = crimson::dmclock;

struct Req {
  unsigned id;
};

using Queue = dmc::PullPriorityQueue<unsigned, Req>;

static const double SERVICE_S = 10e-6;
static const double DEVICE_IOPS = 1.0 / SERVICE_S;

struct Bench {
  std::vector<dmc::ClientInfo> infos;
  Queue queue;
  double now = 1.0;
  unsigned next = 0;

  static std::vector<dmc::ClientInfo> clients(size_t n) {
    std::vector<dmc::ClientInfo> infos;
    double share = DEVICE_IOPS / n;
    for (size_t i = 0; i < n; i++) {
      double reservation = (i % 2 == 0) ? share / 2 + 1 : 0.0;
      double limit = (i % 4 == 1) ? 2 * share : 0.0;
      infos.emplace_back(reservation, 1.0 + i % 4, limit);
    }
    return infos;
  }

  Bench(size_t n, int depth)
      : infos(clients(n)),
        queue([this](const unsigned& c) -> const dmc::ClientInfo* { return &infos[c]; },
              dmc::AtLimit::Wait) {
    for (size_t c = 0; c < n; c++)
      for (int d = 0; d < depth; d++) add(c);
    for (size_t i = 0; i < 4 * n; i++) request();
  }

  void add(unsigned client) {
    queue.add_request_time(Req{next++}, client, dmc::ReqParams(), now, 1u);
  }

  void request() {
    for (;;) {
      auto pulled = queue.pull_request(now);
      if (pulled.is_retn()) {
        unsigned client = pulled.get_retn().client;
        now += SERVICE_S;
        add(client);
        return;
      }
      if (pulled.is_future()) {
        now = pulled.getTime();
        continue;
      }
      std::fprintf(stderr, "the queue ran empty\n");
      std::exit(1);
    }
  }
};

int main(int argc, char** argv) {
  long count = argc > 1 ? std::atol(argv[1]) : 2000000;
  // DMCLOCK_ONLY=CLIENTS (and DMCLOCK_DEPTH=2 backlogged, 1 churn) runs that one case for
  // `count` requests and prints nothing, as the fq bench's FQ_BENCH_ONLY: for counting
  // instructions (valgrind --tool=cachegrind), which unlike time does not move with the machine.
  if (const char* only = std::getenv("DMCLOCK_ONLY")) {
    const char* depth = std::getenv("DMCLOCK_DEPTH");
    Bench bench(std::strtoul(only, nullptr, 10), depth ? std::atoi(depth) : 2);
    for (long i = 0; i < count; i++) bench.request();
    return 0;
  }
  int runs = argc > 2 ? std::atoi(argv[2]) : 5;
  std::printf("dmclock PullPriorityQueue: ns per request (pull + add), best of %d runs of %ld\n",
              runs, count);
  std::printf("%8s %12s %12s\n", "clients", "backlogged", "churn");
  for (size_t n : {10, 100, 1000, 10000}) {
    std::printf("%8zu", n);
    for (int depth : {2, 1}) {
      Bench bench(n, depth);
      double best = 1e30;
      for (int r = 0; r < runs; r++) {
        auto start = std::chrono::steady_clock::now();
        for (long i = 0; i < count; i++) bench.request();
        auto ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
                      .count();
        if (ns / count < best) best = ns / count;
      }
      std::printf(" %12.1f", best);
    }
    std::printf("\n");
  }
  return 0;
}
