// Requests as plain data: every RequestParams field survives RequestToJson / RequestFromJson, a request read
// back from its JSON gives the engine's very tokens (sampled, n > 1, logprobs, logit bias, stop ids, and a
// grammar-constrained one), bad input is a kInvalidArgument naming the field, and a grammar compiles off
// the step thread (its error finishes the request with kError).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>

#include "engine/request_codec.h"
#include "engine_test_support.h"
#include "grammar/token_index.h"
#include "sampling/constraint_masks.h"

namespace deepinfer::engine {
namespace {

using test_support::MakeEngine;
using test_support::Prompt;

// The fixture's 256 ids as single bytes: 0 and 1 (BOS, EOS) are left out of the trie, EOS is the stop id.
std::shared_ptr<sampling::ConstraintCompiler> ByteCompiler() {
  std::vector<std::string> tokens;
  for (int i = 0; i < 256; ++i) tokens.push_back(std::string(1, static_cast<char>(i)));
  auto vocab = grammar::TokenIndex::FromTokens(tokens, {0, 1}, {1}, 256);
  EXPECT_TRUE(vocab.ok());
  return std::make_shared<sampling::ConstraintCompiler>(*vocab);
}

RequestParams EveryField() {
  RequestParams p;
  sampling::SamplingParams& s = p.sampling;
  s.temperature = 0.7312345678901234;
  s.top_k = 40;
  s.top_p = 0.93;
  s.min_p = 0.01;
  s.repetition_penalty = 1.1;
  s.presence_penalty = 0.25;
  s.frequency_penalty = -0.5;
  s.logit_bias = {{5, 2.5f}, {9, -100.0f}, {17, 0.1f}};
  s.seed = 18446744073709551557ull;
  s.random_stream = 7;
  s.max_tokens = 9;
  s.min_tokens = 2;
  s.ignore_eos = true;
  s.stop_token_ids = {3, 4};
  s.stop = {"\n\n", "é"};
  s.include_stop_str_in_output = true;
  s.n = 2;
  s.logprobs = true;
  s.top_logprobs = 3;
  p.priority = -3;
  p.deadline_nanos = 123456789012345;
  p.cache_salt = "tenant-a";
  p.kv_ttl_class = "agent";
  grammar::ConstraintSpec spec;
  spec.kind = grammar::ConstraintSpec::Kind::kJsonSchema;
  spec.text = R"({"type":"object","properties":{"a":{"type":"integer"}}})";
  spec.choices = {"x", "y"};
  spec.json.whitespace = grammar::JsonSchemaOptions::Whitespace::kPython;
  spec.json.strict = true;
  spec.json.integer_fraction = false;
  spec.json.draft7_without_schema = true;
  spec.json.one_of_as_any_of = true;
  spec.json.max_schema_bytes = 1000;
  spec.json.max_depth = 12;
  p.constraint.grammar = spec;
  p.constraint.grammar_start_after_token = 200;
  p.detokenize = false;
  p.skip_special_tokens = false;
  p.prompt_logprobs = 3;
  p.tag = "req-1";
  return p;
}

TEST(RequestCodec, EveryFieldRoundTrips) {
  PlainRequest in{{5, 6, 7, 250}, EveryField()};
  const std::string json = RequestToJson(in);
  auto out = RequestFromJson(json);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->prompt, in.prompt);
  const RequestParams& a = in.params;
  const RequestParams& b = out->params;
  EXPECT_EQ(b.sampling.temperature, a.sampling.temperature);  // doubles exactly
  EXPECT_EQ(b.sampling.top_k, a.sampling.top_k);
  EXPECT_EQ(b.sampling.top_p, a.sampling.top_p);
  EXPECT_EQ(b.sampling.min_p, a.sampling.min_p);
  EXPECT_EQ(b.sampling.repetition_penalty, a.sampling.repetition_penalty);
  EXPECT_EQ(b.sampling.presence_penalty, a.sampling.presence_penalty);
  EXPECT_EQ(b.sampling.frequency_penalty, a.sampling.frequency_penalty);
  EXPECT_EQ(b.sampling.logit_bias, a.sampling.logit_bias);
  EXPECT_EQ(b.sampling.seed, a.sampling.seed);
  EXPECT_EQ(b.sampling.random_stream, a.sampling.random_stream);
  EXPECT_EQ(b.sampling.max_tokens, a.sampling.max_tokens);
  EXPECT_EQ(b.sampling.min_tokens, a.sampling.min_tokens);
  EXPECT_EQ(b.sampling.ignore_eos, a.sampling.ignore_eos);
  EXPECT_EQ(b.sampling.stop_token_ids, a.sampling.stop_token_ids);
  EXPECT_EQ(b.sampling.stop, a.sampling.stop);
  EXPECT_EQ(b.sampling.include_stop_str_in_output, a.sampling.include_stop_str_in_output);
  EXPECT_EQ(b.sampling.n, a.sampling.n);
  EXPECT_EQ(b.sampling.logprobs, a.sampling.logprobs);
  EXPECT_EQ(b.sampling.top_logprobs, a.sampling.top_logprobs);
  EXPECT_EQ(b.priority, a.priority);
  EXPECT_EQ(b.deadline_nanos, a.deadline_nanos);
  EXPECT_EQ(b.cache_salt, a.cache_salt);
  EXPECT_EQ(b.kv_ttl_class, a.kv_ttl_class);
  ASSERT_TRUE(b.constraint.grammar);
  EXPECT_EQ(b.constraint.grammar->kind, a.constraint.grammar->kind);
  EXPECT_EQ(b.constraint.grammar->text, a.constraint.grammar->text);
  EXPECT_EQ(b.constraint.grammar->choices, a.constraint.grammar->choices);
  EXPECT_EQ(b.constraint.grammar->json.whitespace, a.constraint.grammar->json.whitespace);
  EXPECT_EQ(b.constraint.grammar->json.strict, a.constraint.grammar->json.strict);
  EXPECT_EQ(b.constraint.grammar->json.integer_fraction, a.constraint.grammar->json.integer_fraction);
  EXPECT_EQ(b.constraint.grammar->json.draft7_without_schema, a.constraint.grammar->json.draft7_without_schema);
  EXPECT_EQ(b.constraint.grammar->json.one_of_as_any_of, a.constraint.grammar->json.one_of_as_any_of);
  EXPECT_EQ(b.constraint.grammar->json.max_schema_bytes, a.constraint.grammar->json.max_schema_bytes);
  EXPECT_EQ(b.constraint.grammar->json.max_depth, a.constraint.grammar->json.max_depth);
  EXPECT_EQ(b.constraint.grammar_start_after_token, a.constraint.grammar_start_after_token);
  EXPECT_FALSE(b.constraint.scripted_tokens);
  EXPECT_EQ(b.detokenize, a.detokenize);
  EXPECT_EQ(b.skip_special_tokens, a.skip_special_tokens);
  EXPECT_EQ(b.prompt_logprobs, a.prompt_logprobs);
  EXPECT_EQ(b.tag, a.tag);
  EXPECT_EQ(RequestToJson(*out), json);

  // Scripted tokens (an empty script is not no script), an absent seed, and defaults for absent fields.
  PlainRequest scripted{{2}, RequestParams{}};
  scripted.params.constraint.scripted_tokens = std::vector<int32_t>{};
  auto back = RequestFromJson(RequestToJson(scripted));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->params.constraint.scripted_tokens);
  EXPECT_TRUE(back->params.constraint.scripted_tokens->empty());
  EXPECT_FALSE(back->params.constraint.grammar);
  EXPECT_FALSE(back->params.sampling.seed);
  auto minimal = RequestFromJson(R"({"prompt":[1,2]})");
  ASSERT_TRUE(minimal.ok()) << minimal.status().ToString();
  EXPECT_EQ(RequestToJson(*minimal), RequestToJson(PlainRequest{{1, 2}, RequestParams{}}));
}

TEST(RequestCodec, BadInputIsAnErrorNamingTheField) {
  struct Case {
    std::string json;
    std::string field;  // in the message
  };
  const std::string big_prompt = "{\"prompt\":[" + std::string(kMaxRequestJsonBytes, ' ') + "1]}";
  const std::vector<Case> cases = {
      {"", "request"},
      {"[1]", "JSON object"},
      {R"({"prompt":[1],"x":1})", "x: unknown field"},
      {R"({"sampling":{}})", "prompt: required"},
      {R"({"prompt":[-1]})", "prompt"},
      {R"({"prompt":[2147483648]})", "prompt"},
      {R"({"prompt":[1.5]})", "prompt"},
      {R"({"prompt":"abc"})", "prompt"},
      {R"({"prompt":[1],"sampling":{"temperature":"hot"}})", "sampling.temperature"},
      {R"({"prompt":[1],"sampling":{"temperature":-1}})", "temperature"},
      {R"({"prompt":[1],"sampling":{"n":1000}})", "n"},
      {R"({"prompt":[1],"sampling":{"n":4294967297}})", "sampling.n"},
      {R"({"prompt":[1],"sampling":{"seed":-5}})", "sampling.seed"},
      {R"({"prompt":[1],"sampling":{"logit_bias":[[1]]}})", "sampling.logit_bias"},
      {R"({"prompt":[1],"sampling":{"logit_bias":[[1,1000]]}})", "sampling.logit_bias"},
      {R"({"prompt":[1],"sampling":{"stop":[1]}})", "sampling.stop"},
      {R"({"prompt":[1],"sampling":{"bogus":1}})", "sampling.bogus: unknown field"},
      {R"({"prompt":[1],"cache_salt":")" + std::string(kMaxSaltBytes + 1, 's') + "\"}", "cache_salt"},
      {R"({"prompt":[1],"tag":7})", "tag"},
      {R"({"prompt":[1],"deadline_nanos":-1})", "deadline_nanos"},
      {R"({"prompt":[1],"constraint":{"grammar":{"kind":"lisp"}}})", "constraint.grammar.kind"},
      {R"({"prompt":[1],"constraint":{"grammar":{"text":"a"}}})", "constraint.grammar.kind"},
      {R"({"prompt":[1],"constraint":{"grammar":{"kind":"regex","json":{"whitespace":"tabs"}}}})",
       "constraint.grammar.json.whitespace"},
      {R"({"prompt":[1],"constraint":{"grammar":{"kind":"regex"},"scripted_tokens":[1]}})", "cannot be combined"},
      {R"({"prompt":[1],"constraint":{"grammar_start_after_token":-2}})", "grammar_start_after_token"},
      {R"({"prompt":[1],"constraint":[]})", "constraint"},
      {R"({"prompt":[1],"constraint":{"grammar":{"kind":"regex","json":{"x":[[[[[[1]]]]]]}}}})", "request"},
      {big_prompt, "request"},
  };
  for (const Case& c : cases) {
    auto r = RequestFromJson(c.json);
    ASSERT_FALSE(r.ok()) << c.json.substr(0, 200);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.json.substr(0, 200);
    EXPECT_NE(r.status().message().find(c.field), std::string::npos) << r.status().message();
  }
}

std::vector<GenerateOutput> RunRequest(Engine& engine, const PlainRequest& request) {
  auto r = engine.Generate(std::vector<std::vector<int32_t>>{request.prompt}, request.params);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<GenerateOutput>{};
}

void ExpectSameTokens(const GenerateOutput& a, const GenerateOutput& b) {
  EXPECT_EQ(a.seed, b.seed);
  ASSERT_EQ(a.sequences.size(), b.sequences.size());
  for (size_t i = 0; i < a.sequences.size(); ++i) {
    const auto& x = a.sequences[i];
    const auto& y = b.sequences[i];
    EXPECT_EQ(x.finish, y.finish);
    ASSERT_EQ(x.tokens.size(), y.tokens.size());
    for (size_t t = 0; t < x.tokens.size(); ++t) {
      EXPECT_EQ(x.tokens[t].id, y.tokens[t].id);
      EXPECT_EQ(x.tokens[t].logprob, y.tokens[t].logprob);
      ASSERT_EQ(x.tokens[t].top_logprobs.size(), y.tokens[t].top_logprobs.size());
      for (size_t k = 0; k < x.tokens[t].top_logprobs.size(); ++k)
        EXPECT_EQ(x.tokens[t].top_logprobs[k].id, y.tokens[t].top_logprobs[k].id);
    }
  }
}

TEST(RequestCodec, ARequestReadBackGivesTheSameTokens) {
  EngineOptions options;
  options.constraint_compiler = ByteCompiler();
  auto engine = MakeEngine(options);
  ASSERT_TRUE(engine);

  PlainRequest sampled{Prompt(30, 5), RequestParams{}};
  sampled.params.sampling.temperature = 0.9;
  sampled.params.sampling.seed = 42;
  sampled.params.sampling.max_tokens = 10;
  sampled.params.sampling.n = 2;
  sampled.params.sampling.logprobs = true;
  sampled.params.sampling.top_logprobs = 2;
  sampled.params.sampling.logit_bias = {{7, 5.0f}, {8, -3.0f}};
  sampled.params.sampling.stop_token_ids = {200};
  sampled.params.sampling.repetition_penalty = 1.2;
  sampled.params.detokenize = false;

  PlainRequest constrained{Prompt(25, 6), RequestParams{}};
  constrained.params.sampling.temperature = 1.0;
  constrained.params.sampling.seed = 7;
  constrained.params.sampling.max_tokens = 20;
  constrained.params.sampling.n = 3;
  grammar::ConstraintSpec spec;
  spec.kind = grammar::ConstraintSpec::Kind::kRegex;
  spec.text = "[a-e]{2,6}x";
  constrained.params.constraint.grammar = spec;

  for (const PlainRequest* original : {&sampled, &constrained}) {
    auto copy = RequestFromJson(RequestToJson(*original));
    ASSERT_TRUE(copy.ok()) << copy.status().ToString();
    const auto a = RunRequest(*engine, *original);
    const auto b = RunRequest(*engine, *copy);
    ASSERT_EQ(a.size(), 1u);
    ASSERT_EQ(b.size(), 1u);
    ExpectSameTokens(a[0], b[0]);
  }
  // The constrained outputs follow the grammar: 2-6 of a..e, then x, then the end (EOS) where it may end.
  const auto out = RunRequest(*engine, constrained);
  ASSERT_EQ(out.size(), 1u);
  for (const auto& s : out[0].sequences) {
    EXPECT_EQ(s.finish, FinishReason::kStop);
    ASSERT_GE(s.tokens.size(), 3u);
    ASSERT_LE(s.tokens.size(), 7u);
    for (size_t i = 0; i + 1 < s.tokens.size(); ++i) {
      EXPECT_GE(s.tokens[i].id, 'a');
      EXPECT_LE(s.tokens[i].id, 'e');
    }
    EXPECT_EQ(s.tokens.back().id, 'x');
  }
}

TEST(RequestCodec, GrammarsCompileOnceAndAFailedCompileFinishesWithError) {
  EngineOptions options;
  options.constraint_compiler = ByteCompiler();
  auto compiler = options.constraint_compiler;
  auto engine = MakeEngine(options);
  ASSERT_TRUE(engine);
  RequestParams p;
  p.sampling.temperature = 0;
  p.sampling.max_tokens = 8;
  grammar::ConstraintSpec spec;
  spec.kind = grammar::ConstraintSpec::Kind::kRegex;
  spec.text = "ab+";
  // The server compiles first to validate; the engine's compile is then a hit on the shared cache.
  ASSERT_TRUE(compiler->Compile(spec).ok());
  const size_t hits = compiler->hits();
  p.constraint.grammar = spec;
  auto r = engine->Generate(std::vector<std::vector<int32_t>>{Prompt(10, 1)}, p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(compiler->cached(), 1u);
  EXPECT_EQ(compiler->hits(), hits + 1);
  ASSERT_FALSE((*r)[0].sequences[0].tokens.empty());
  EXPECT_EQ((*r)[0].sequences[0].tokens[0].id, 'a');

  spec.text = "(unclosed";
  p.constraint.grammar = spec;
  r = engine->Generate(std::vector<std::vector<int32_t>>{Prompt(10, 1)}, p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].sequences[0].finish, FinishReason::kError);
  EXPECT_TRUE((*r)[0].sequences[0].tokens.empty());
  EXPECT_FALSE((*r)[0].status.ok());
  EXPECT_EQ((*r)[0].status.message().rfind("constraint: ", 0), 0u) << (*r)[0].status.message();

  // Without a tokenizer or a compiler, a grammar is refused when added; a grammar with a script too.
  auto plain = MakeEngine();
  ASSERT_TRUE(plain);
  auto refused = plain->AddRequest(Prompt(10, 1), p, [](RequestUpdate) {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  p.constraint.scripted_tokens = std::vector<int32_t>{5};
  refused = engine->AddRequest(Prompt(10, 1), p, [](RequestUpdate) {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
}

// A compile answered from the cache can finish before AddRequest returns; its outcome must still find its
// request (a report that reached the step thread first would leave the request waiting forever). Each
// request is waited for with a deadline, so a stranded one fails the test instead of hanging it.
TEST(RequestCodec, ACompileThatFinishesAtOnceNeverStrandsItsRequest) {
  EngineOptions options;
  options.constraint_compiler = ByteCompiler();
  auto compiler = options.constraint_compiler;
  auto engine = MakeEngine(options);
  ASSERT_TRUE(engine);
  RequestParams p;
  p.sampling.temperature = 0;
  p.sampling.max_tokens = 1;
  grammar::ConstraintSpec spec;
  spec.kind = grammar::ConstraintSpec::Kind::kRegex;
  spec.text = "ab+";
  ASSERT_TRUE(compiler->Compile(spec).ok());
  p.constraint.grammar = spec;
  struct Done {
    std::mutex mu;
    std::condition_variable cv;
    int finished = 0;
  };
  auto done = std::make_shared<Done>();
  constexpr int kRequests = 300;
  for (int i = 0; i < kRequests; ++i) {
    auto id = engine->AddRequest(Prompt(4, i % 7), p, [done](RequestUpdate u) {
      if (!u.finished) return;
      std::lock_guard<std::mutex> lock(done->mu);
      ++done->finished;
      done->cv.notify_all();
    });
    ASSERT_TRUE(id.ok()) << id.status().ToString();
    std::unique_lock<std::mutex> lock(done->mu);
    ASSERT_TRUE(done->cv.wait_for(lock, std::chrono::seconds(20), [&] { return done->finished == i + 1; }))
        << "request " << i << " never finished";
  }
}

}  // namespace
}  // namespace deepinfer::engine
