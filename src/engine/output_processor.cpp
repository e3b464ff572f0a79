// OutputProcessor's threads: detokenization, stop strings and the requests' callbacks.
#include "engine/output_processor.h"

#include "core/clock.h"
#include "core/log.h"
#include "core/sched.h"

namespace deepinfer::engine {

OutputProcessor::OutputProcessor(const tokenizer::Tokenizer* tokenizer, int threads, int64_t thread_slice_us,
                                 StopCallback on_stop)
    : tokenizer_(tokenizer), thread_slice_us_(thread_slice_us), on_stop_(std::move(on_stop)) {
  for (int i = 0; i < threads; ++i) {
    shards_.push_back(std::make_unique<Shard>());
    Shard* shard = shards_.back().get();
    shard->thread = std::thread([this, shard] {
      SetCurrentThreadName("di-engine-out");
      Loop(shard);
    });
  }
}

OutputProcessor::~OutputProcessor() { Stop(); }

void OutputProcessor::Stop() {
  for (auto& shard : shards_) {
    {
      MutexLock lock(&shard->mu);
      shard->stop = true;
    }
    shard->cv.SignalAll();
  }
  for (auto& shard : shards_)
    if (shard->thread.joinable()) shard->thread.join();
}

void OutputProcessor::Post(std::vector<OutputEvent>& events) {
  if (events.empty()) return;
  const int64_t now = NowNanos();
  const size_t shards = shards_.size();
  sorted_.resize(shards);
  for (OutputEvent& e : events) {
    e.posted_nanos = now;
    sorted_[static_cast<size_t>(e.request->id % shards)].push_back(std::move(e));
  }
  for (size_t i = 0; i < shards; ++i) {
    std::vector<OutputEvent>& mine = sorted_[i];
    if (mine.empty()) continue;
    Shard& shard = *shards_[i];
    {
      MutexLock lock(&shard.mu);
      for (OutputEvent& e : mine) shard.queue.push_back(std::move(e));
    }
    // One wake-up per shard and step, after the lock: a notify per event (or under the lock) let the
    // output thread preempt this thread once per request and contend for the mutex it had just been
    // woken on.
    shard.cv.Signal();
    mine.clear();
  }
  events.clear();
}

void OutputProcessor::Loop(Shard* shard) {
  if (thread_slice_us_ > 0) {
    const Status slice = SetThreadLatencySlice(thread_slice_us_);
    if (!slice.ok()) DI_LOG(kDebug, "engine: output thread keeps the default time slice").Field("why", slice.message());
  }
  std::deque<OutputEvent> batch;
  while (true) {
    {
      MutexLock lock(&shard->mu);
      while (!shard->stop && shard->queue.empty()) shard->cv.Wait(&shard->mu);
      if (shard->queue.empty() && shard->stop) return;
      batch.swap(shard->queue);
    }
    for (OutputEvent& e : batch) Deliver(e);
    batch.clear();
  }
}

namespace {

GeneratedToken Generated(const sampling::SampledToken& t, bool text, const tokenizer::Tokenizer* tok) {
  GeneratedToken g;
  g.id = t.id;
  g.logprob = t.logprob;
  if (text) {
    g.bytes = std::string(tok->TokenBytes(t.id));
    g.control = tok->IsAddedToken(t.id);
    g.special = g.control && tok->IsSpecialToken(t.id);
  }
  for (const sampling::TopLogprob& alt : t.top) {
    TokenAlternative a;
    a.id = alt.id;
    a.logprob = alt.logprob;
    if (text) a.bytes = std::string(tok->TokenBytes(alt.id));
    g.top_logprobs.push_back(std::move(a));
  }
  return g;
}

}  // namespace

void OutputProcessor::Deliver(OutputEvent& event) {
  OutputRequest& o = *event.request;
  if (o.done) return;
  o.hit_tokens = event.hit_tokens;
  const tokenizer::Tokenizer* tok = tokenizer_;
  RequestUpdate u;
  u.id = o.id;
  u.prompt_tokens = o.prompt_tokens;
  u.prompt_cache_hit_tokens = o.hit_tokens;
  u.seed = o.seed;
  u.emitted_nanos = event.posted_nanos;
  std::vector<int> stopped;  // outputs this thread finished on a stop string
  for (const sampling::SampledToken& t : event.prompt_logprobs) u.prompt_logprobs.push_back(Generated(t, o.text, tok));
  for (SeqEvent& se : event.seqs) {
    OutputSequence& os = o.seqs[static_cast<size_t>(se.index)];
    if (os.finished) continue;
    SequenceDelta d;
    d.index = se.index;
    for (sampling::SampledToken& t : se.tokens) {
      d.tokens.push_back(Generated(t, o.text, tok));
      if (o.text) {
        sampling::StopStringMatcher::Step step = os.stops->Feed(os.detokenizer->Add(t.id));
        d.text += step.release;
        if (step.stopped) {
          d.finish = FinishReason::kStop;
          d.stop_string = step.matched;
          stopped.push_back(se.index);
          break;
        }
      }
    }
    if (!d.finish && se.finish) {
      if (o.text) {
        sampling::StopStringMatcher::Step step = os.stops->Feed(os.detokenizer->Finish());
        d.text += step.release;
        if (step.stopped) d.stop_string = step.matched;
        else d.text += os.stops->Flush();
      }
      // A stop string in the flushed tail is still a stop; otherwise the step thread's reason.
      d.finish = d.stop_string.empty() ? *se.finish : FinishReason::kStop;
      d.stop_token = se.stop_token;
    }
    if (d.finish) {
      os.finished = true;
      ++o.finished;
    }
    if (!d.tokens.empty() || !d.text.empty() || d.finish) u.sequences.push_back(std::move(d));
  }
  if (o.finished == static_cast<int>(o.seqs.size())) {
    u.finished = true;
    u.status = event.status;
    o.done = true;
  }
  if (!stopped.empty()) {
    std::vector<std::pair<RequestId, int>> stops;
    for (int index : stopped) stops.push_back({o.id, index});
    on_stop_(std::move(stops));
  }
  if (u.sequences.empty() && u.prompt_logprobs.empty() && !u.finished) return;
  o.callback(std::move(u));
}

}  // namespace deepinfer::engine
