// libFuzzer target for what src/server itself reads from untrusted requests (Beast parses the HTTP framing,
// the codec the chat protocols' bodies; both are fuzzed on their own): routing, the API key and
// x-request-id headers, the bodies of /v1/completions, /tokenize, /detokenize and
// /v1/messages/count_tokens, the sampling extras of every generation request, and the error shapes.
// The service runs without an engine, so generation requests stop at 503 after all their checks.
//
// Properties: nothing crashes; every request is answered exactly once, synchronously, with a known status;
// a JSON answer is valid JSON (an error one has the protocol's error shape); x-request-id is echoed when
// the client's is acceptable and made otherwise; a generation request whose x-deepinfer-first-token (the
// output's first token a prefill unit hands over) is not a decimal id of the vocabulary never gets as far as
// the missing engine (no 503), whether its other parts are good or not.
//
// Input layout (text, so seeds read as requests): "METHOD PATH\n", then "name: value\n" header lines up to
// an empty line, then the body.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "core/json.h"
#include "server/http_server.h"
#include "server/service.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace {

using namespace deepinfer;

class RecordingChannel : public server::ResponseChannel {
 public:
  void Respond(server::HttpResponse response) override {
    ++answers;
    last = std::move(response);
  }
  void StartStream(int status, std::string, std::vector<server::HttpHeader>) override {
    ++answers;
    last.status = status;
  }
  void Write(std::string) override {}
  void Write(std::string, int64_t) override {}
  void End() override {}
  void OnCancel(std::function<void()>) override {}
  bool cancelled() const override { return false; }
  void Post(std::function<void()> fn) override { fn(); }

  int answers = 0;
  server::HttpResponse last;
};

const tokenizer::Tokenizer& TheTokenizer() {
  static tokenizer::Tokenizer* tok = [] {
    auto t = tokenizer::LoadTokenizer("deepseek-v4");
    if (!t.ok()) std::abort();
    return new tokenizer::Tokenizer(std::move(*t));
  }();
  return *tok;
}

server::Service& TheService() {
  static const tokenizer::Tokenizer* tok = &TheTokenizer();
  static server::Service* service = [] {
    server::ServiceOptions o;
    o.served_model_names = {"m", "other"};
    o.api_keys = {"key"};
    o.max_model_len = 4096;
    o.enable_test_hooks = true;
    auto* s = new server::Service(o, tok);
    s->SetReady(true);
    return s;
  }();
  return *service;
}

std::string_view NextLine(std::string_view* in) {
  const size_t nl = in->find('\n');
  std::string_view line = in->substr(0, nl);
  in->remove_prefix(nl == std::string_view::npos ? in->size() : nl + 1);
  return line;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  server::HttpRequest request;
  const std::string_view first = NextLine(&in);
  const size_t space = first.find(' ');
  request.method = std::string(first.substr(0, space));
  request.target = space == std::string_view::npos ? "/" : std::string(first.substr(space + 1));
  request.path = request.target.substr(0, request.target.find('?'));
  for (int i = 0; i < 64 && !in.empty(); ++i) {
    const std::string_view line = NextLine(&in);
    if (line.empty()) break;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string name(line.substr(0, colon));
    for (char& c : name) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
    request.headers.push_back({std::move(name), std::string(value)});
  }
  request.body = std::string(in);
  const std::string given_id(request.Header("x-request-id"));
  // Read only where neither a prefill-only header nor a stream resumption takes its place.
  const std::string_view first_token = request.Header("x-deepinfer-first-token");
  bool first_token_read = !first_token.empty() && request.Header("x-deepinfer-prefill-only").empty() &&
                          request.body.find("deepinfer_resume") == std::string::npos;
  bool generation = false;
  for (const char* route : {"/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/responses"})
    generation = generation || (request.path == route && request.method == "POST");
  first_token_read = first_token_read && generation;
  bool first_token_ok = true;
  uint64_t first_token_id = 0;
  for (char c : first_token) {
    first_token_ok = first_token_ok && c >= '0' && c <= '9';
    first_token_id = std::min<uint64_t>(first_token_id * 10 + static_cast<uint64_t>(c - '0'), uint64_t{1} << 40);
  }
  first_token_ok = first_token_ok && first_token_id < TheTokenizer().vocab_size();

  auto channel = std::make_shared<RecordingChannel>();
  TheService().Handle(request, channel);
  if (channel->answers != 1) std::abort();
  const server::HttpResponse& r = channel->last;
  if (r.status < 200 || r.status > 599) std::abort();
  std::string echoed;
  for (const auto& h : r.headers)
    if (h.name == "x-request-id") echoed = h.value;
  if (echoed.empty() || echoed.size() > 128) std::abort();
  bool acceptable = !given_id.empty() && given_id.size() <= 128;
  for (char c : given_id) acceptable = acceptable && c > 0x20 && c < 0x7f;
  if (acceptable && echoed != given_id) std::abort();
  if (first_token_read && !first_token_ok && r.status == 503) std::abort();
  if (r.content_type == "application/json" && !r.body.empty()) {
    auto parsed = ParseJson(r.body);
    if (!parsed.ok()) std::abort();
    if (r.status >= 400 && !parsed->contains("error")) std::abort();
  }
  return 0;
}
