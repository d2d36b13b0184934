// /metrics end to end: the latency histograms over every completion surface, errors counted once per
// answer whoever wrote it, and the /v1/contexts counters (fork, snapshot, restore).
#include <gtest/gtest.h>
#include <httplib.h>

#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "server/histogram.h"
#include "server/server_test_util.h"

namespace llamay::server {
namespace {

using json = nlohmann::json;

// The value of the sample `series` (a name, with its labels if any) in a /metrics body; 0 when absent.
double Sample(const std::string& body, const std::string& series) {
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ')
      return std::stod(line.substr(series.size() + 1));
  }
  return 0;
}

// A histogram as /metrics shows it: its buckets in order (le, cumulative count), sum and count.
struct Scraped {
  std::vector<std::pair<std::string, double>> buckets;
  double sum = -1, count = -1;
};

Scraped ScrapeHistogram(const std::string& body, const std::string& name) {
  Scraped h;
  const std::string bucket = name + "_bucket{le=\"";
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(bucket, 0) == 0) {
      const size_t close = line.find("\"} ", bucket.size());
      h.buckets.emplace_back(line.substr(bucket.size(), close - bucket.size()),
                             std::stod(line.substr(close + 3)));
    } else if (line.rfind(name + "_sum ", 0) == 0) {
      h.sum = std::stod(line.substr(name.size() + 5));
    } else if (line.rfind(name + "_count ", 0) == 0) {
      h.count = std::stod(line.substr(name.size() + 7));
    }
  }
  return h;
}

// Checks the shape every rendering must have: typed a histogram, buckets that never decrease and end
// with +Inf equal to _count, a sum.
void ExpectWellFormed(const std::string& body, const std::string& name) {
  SCOPED_TRACE(name);
  EXPECT_NE(body.find("# TYPE " + name + " histogram\n"), std::string::npos);
  const Scraped h = ScrapeHistogram(body, name);
  ASSERT_GE(h.buckets.size(), 2u);
  for (size_t i = 1; i < h.buckets.size(); ++i) {
    EXPECT_GE(h.buckets[i].second, h.buckets[i - 1].second) << "le=" << h.buckets[i].first;
    if (i + 1 < h.buckets.size()) {
      EXPECT_LT(std::stod(h.buckets[i - 1].first), std::stod(h.buckets[i].first));
    }
  }
  EXPECT_EQ(h.buckets.back().first, "+Inf");
  EXPECT_EQ(h.buckets.back().second, h.count);
  EXPECT_GE(h.sum, 0);
}

constexpr const char* kTtft = "llamay_time_to_first_token_seconds";
constexpr const char* kTpot = "llamay_time_per_output_token_seconds";
constexpr const char* kDuration = "llamay_request_duration_seconds";

class MetricsTest : public ServerTest {
 protected:
  std::string Scrape() {
    auto r = client_->Get("/metrics");
    EXPECT_TRUE(r);
    return r ? r->body : std::string();
  }
  double Count(const char* histogram) { return ScrapeHistogram(Scrape(), histogram).count; }
  // The status of a raw POST (not JSON-checked: error bodies of every surface).
  int PostStatus(const std::string& path, const std::string& body, const httplib::Headers& headers = {}) {
    auto r = client_->Post(path.c_str(), headers, body, "application/json");
    EXPECT_TRUE(r) << path;
    return r ? r->status : -1;
  }
};

TEST(HistogramTest, BucketsAreCumulativeWithInclusiveUpperBounds) {
  Histogram h{0.1, 1};
  std::string empty;
  h.Render("t", "help", &empty);
  EXPECT_EQ(empty,
            "# HELP t help\n# TYPE t histogram\n"
            "t_bucket{le=\"0.1\"} 0\nt_bucket{le=\"1\"} 0\nt_bucket{le=\"+Inf\"} 0\nt_sum 0\nt_count 0\n");
  h.Observe(0.1);  // le: "less than or equal"
  h.Observe(0.5);
  h.Observe(5);
  h.Observe(0);
  std::string out;
  h.Render("t", "help", &out);
  EXPECT_EQ(out,
            "# HELP t help\n# TYPE t histogram\n"
            "t_bucket{le=\"0.1\"} 2\nt_bucket{le=\"1\"} 3\nt_bucket{le=\"+Inf\"} 4\nt_sum 5.6\nt_count 4\n");
}

TEST(HistogramTest, ConcurrentObservationsAreAllCounted) {
  Histogram h{0.001, 0.01};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&h, t] {
      for (int i = 0; i < 10000; ++i) h.Observe(t % 2 ? 0.005 : 0.5);
    });
  for (auto& t : threads) t.join();
  std::string out;
  h.Render("t", "h", &out);
  EXPECT_NE(out.find("t_bucket{le=\"0.001\"} 0\nt_bucket{le=\"0.01\"} 40000\nt_bucket{le=\"+Inf\"} 80000\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("t_count 80000\n"), std::string::npos);
  EXPECT_NEAR(ScrapeHistogram(out, "t").sum, 40000 * 0.505, 1e-6);
}

// Every completion surface, streamed or not, counts one TTFT and one duration per request, and one TPOT
// per choice that generated 2 tokens or more; nothing else (a refused request, a context's prefill) does.
TEST_F(MetricsTest, LatencyHistogramsCountEveryCompletionOnce) {
  const std::string before = Scrape();
  for (const char* name : {kTtft, kTpot, kDuration}) ExpectWellFormed(before, name);
  const double ttft0 = ScrapeHistogram(before, kTtft).count, tpot0 = ScrapeHistogram(before, kTpot).count,
               duration0 = ScrapeHistogram(before, kDuration).count;
  EXPECT_EQ(ttft0, 0);

  // Non-streamed, each surface; the tokens each generated decide whether it has a TPOT.
  const json user = json::array({{{"role", "user"}, {"content", "hello"}}});
  std::vector<size_t> tokens;
  tokens.push_back(
      Post("/v1/completions",
           {{"prompt", "once"}, {"max_tokens", 4}, {"temperature", 0}})["usage"]["completion_tokens"]);
  tokens.push_back(
      Post("/v1/chat/completions",
           {{"messages", user}, {"max_tokens", 4}, {"temperature", 0}})["usage"]["completion_tokens"]);
  tokens.push_back(Post("/v1/responses", {{"model", "m"},
                                          {"input", "hi"},
                                          {"max_output_tokens", 4},
                                          {"temperature", 0}})["usage"]["output_tokens"]);
  tokens.push_back(Post(
      "/v1/messages",
      {{"model", "m"}, {"max_tokens", 4}, {"temperature", 0}, {"messages", user}})["usage"]["output_tokens"]);
  tokens.push_back(Post("/api/chat", {{"model", "m"},
                                      {"messages", user},
                                      {"stream", false},
                                      {"options", {{"temperature", 0}, {"num_predict", 4}}}})["eval_count"]);
  // Streamed: ignore_eos makes the count certain.
  const std::pair<const char*, json> streamed[] = {
      {"/v1/chat/completions",
       {{"messages", user}, {"max_tokens", 3}, {"ignore_eos", true}, {"stream", true}}},
      {"/v1/completions", {{"prompt", "twice"}, {"max_tokens", 3}, {"ignore_eos", true}, {"stream", true}}}};
  for (const auto& [path, body] : streamed) {
    auto r = client_->Post(path, body.dump(), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_NE(r->body.find("data: [DONE]"), std::string::npos);
    tokens.push_back(3);
  }
  // One token: a TTFT and a duration, no TPOT.
  EXPECT_EQ(Post("/v1/completions",
                 {{"prompt", "one"}, {"max_tokens", 1}, {"ignore_eos", true}})["usage"]["completion_tokens"],
            1);
  tokens.push_back(1);
  // Two choices: one request (one TTFT, one duration), two completions (two TPOTs).
  Post("/v1/completions", {{"prompt", "two ways"}, {"max_tokens", 3}, {"n", 2}, {"ignore_eos", true}});
  // Neither a refused request nor a context's prefill is a completion.
  Post("/v1/completions", {{"prompt", "x"}, {"max_tokens", -1}}, 400);
  Post("/v1/contexts", {{"prompt", "a prefill only"}});

  size_t with_tpot = 2;  // the two choices
  for (size_t t : tokens) with_tpot += t >= 2 ? 1 : 0;
  EXPECT_GE(with_tpot, 4u);  // the streamed ones and the two choices at least
  const std::string after = Scrape();
  for (const char* name : {kTtft, kTpot, kDuration}) ExpectWellFormed(after, name);
  const Scraped ttft = ScrapeHistogram(after, kTtft), duration = ScrapeHistogram(after, kDuration);
  EXPECT_EQ(ttft.count - ttft0, static_cast<double>(tokens.size() + 1));
  EXPECT_EQ(ScrapeHistogram(after, kTpot).count - tpot0, static_cast<double>(with_tpot));
  EXPECT_EQ(duration.count - duration0, static_cast<double>(tokens.size() + 1));
  // A request's first token comes before its end.
  EXPECT_GT(ttft.sum, 0);
  EXPECT_LE(ttft.sum, duration.sum);
}

// Errors are counted once per answer with a status >= 400, whatever wrote it: a route (bad JSON, an
// unknown context), the pre-routing checks (Origin), the error handler (no route, a body too large).
TEST_F(MetricsTest, EveryErrorAnswerIsCountedOnceByStatus) {
  const std::string before = Scrape();
  const double errors0 = Sample(before, "llamay_request_errors_total");
  auto by = [](const std::string& body, int code) {
    return Sample(body, "llamay_requests_by_status_total{code=\"" + std::to_string(code) + "\"}");
  };
  EXPECT_EQ(PostStatus("/v1/chat/completions", "{not json"), 400);
  EXPECT_EQ(PostStatus("/v1/completions", R"({"prompt": 5})"), 400);
  EXPECT_EQ(PostStatus("/v1/messages", "{"), 400);  // Anthropic's error shape, same count
  EXPECT_EQ(PostStatus("/v1/contexts/ctx_404/fork?n=2", ""), 404);
  auto nf = client_->Get("/no-such-route");
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->status, 404);
  EXPECT_EQ(PostStatus("/v1/completions", std::string(2 << 20, 'x')), 413);
  EXPECT_EQ(PostStatus("/v1/completions", R"({"prompt":"x","max_tokens":1})",
                       {{"Origin", "http://elsewhere.example"}}),
            403);
  // Answers that are not errors change nothing.
  EXPECT_EQ(client_->Get("/health")->status, 200);
  EXPECT_EQ(PostStatus("/v1/completions", R"({"prompt":"x","max_tokens":1})"), 200);

  const std::string after = Scrape();
  EXPECT_EQ(Sample(after, "llamay_request_errors_total") - errors0, 7) << after;
  EXPECT_EQ(by(after, 400) - by(before, 400), 3);
  EXPECT_EQ(by(after, 404) - by(before, 404), 2);
  EXPECT_EQ(by(after, 413) - by(before, 413), 1);
  EXPECT_EQ(by(after, 403) - by(before, 403), 1);
  EXPECT_GE(by(after, 200) - by(before, 200), 3);  // /health, the completion, the first /metrics
  EXPECT_NE(after.find("# TYPE llamay_requests_by_status_total counter\n"), std::string::npos);
  EXPECT_NE(
      after.find("# HELP llamay_request_errors_total HTTP requests answered with a status of 400 or more\n"),
      std::string::npos);
  EXPECT_LE(Sample(after, "llamay_request_errors_total"), Sample(after, "llamay_requests_total"));
}

TEST_F(MetricsTest, RefusedKeysAndAFullQueueAreErrors) {
  ServerOptions o;
  o.api_key = "secret";
  engine::EngineOptions eo;
  eo.max_active = 1;
  eo.max_queue = 1;
  Start(o, eo);
  const httplib::Headers key = {{"Authorization", "Bearer secret"}};
  auto scrape = [&] { return client_->Get("/metrics", key)->body; };
  const double errors0 = Sample(scrape(), "llamay_request_errors_total");
  EXPECT_EQ(PostStatus("/v1/completions", R"({"prompt":"x","max_tokens":1})"), 401);
  EXPECT_EQ(Sample(scrape(), "llamay_request_errors_total") - errors0, 1);

  // Occupy the only running slot (this sink holds the scheduler until released), queue one, refuse one.
  std::promise<void> entered, release, blocker_done;
  std::shared_future<void> released = release.get_future().share();
  bool first = true;
  engine::Request blocker;
  blocker.prompt = {1, 40, 41, 42};
  blocker.max_tokens = 3;
  ASSERT_TRUE(engine_
                  ->Submit(std::move(blocker),
                           [&](engine::Event& e) {
                             if (first) {
                               first = false;
                               entered.set_value();
                               released.wait();
                             }
                             if (e.finished) blocker_done.set_value();
                             return true;
                           })
                  .ok());
  entered.get_future().wait();
  std::thread queued([&] {
    httplib::Client c("127.0.0.1", server_->port());
    c.set_read_timeout(kClientTimeoutSeconds, 0);
    auto r = c.Post("/v1/completions", key, R"({"prompt":"queued","max_tokens":2})", "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << r->body;
  });
  while (engine_->queue_depth() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  EXPECT_EQ(PostStatus("/v1/completions", R"({"prompt":"x","max_tokens":2})", key), 429);
  release.set_value();
  blocker_done.get_future().wait();
  queued.join();
  const std::string after = scrape();
  EXPECT_EQ(Sample(after, "llamay_request_errors_total") - errors0, 2) << after;
  EXPECT_EQ(Sample(after, "llamay_requests_by_status_total{code=\"429\"}"), 1);
  EXPECT_EQ(Sample(after, "llamay_requests_by_status_total{code=\"401\"}"), 1);
}

TEST_F(MetricsTest, ForksSnapshotsAndRestoresAreCounted) {
  const json ctx = Post("/v1/contexts", {{"prompt", "a context to fork, snapshot and restore"}});
  const std::string id = ctx["id"];
  const std::string before = Scrape();
  Post("/v1/contexts/" + id + "/fork?n=3", json::object());
  Post("/v1/contexts/ctx_404/fork?n=2", json::object(), 404);  // no branch made
  auto snap = client_->Get(("/v1/contexts/" + id + "/snapshot").c_str());
  ASSERT_TRUE(snap);
  ASSERT_EQ(snap->status, 200);
  auto restored = client_->Post("/v1/contexts/restore", snap->body, "application/octet-stream");
  ASSERT_TRUE(restored);
  EXPECT_EQ(restored->status, 200) << restored->body;
  auto bad = client_->Post("/v1/contexts/restore", std::string("not a snapshot"), "application/octet-stream");
  ASSERT_TRUE(bad);
  EXPECT_GE(bad->status, 400);  // refused: not a restore
  const std::string after = Scrape();
  EXPECT_EQ(Sample(after, "llamay_context_forks_total") - Sample(before, "llamay_context_forks_total"), 3);
  EXPECT_EQ(
      Sample(after, "llamay_context_snapshots_total") - Sample(before, "llamay_context_snapshots_total"), 1);
  EXPECT_EQ(Sample(after, "llamay_context_restores_total") - Sample(before, "llamay_context_restores_total"),
            1);
}

}  // namespace
}  // namespace llamay::server
