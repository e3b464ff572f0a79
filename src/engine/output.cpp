// The output threads: each turns the step thread's events into RequestUpdates — token bytes, the control flag,
// detokenized text with stop strings matched across tokens — and calls the requests' callbacks, so neither
// detokenization nor a consumer's callback ever runs on the step thread.
#include "core/log.h"
#include "core/sched.h"
#include "engine/engine_impl.h"

namespace deepinfer::engine {

void EngineImpl::OutputLoop(OutputShard* shard) {
  if (options_.output_thread_slice_us > 0) {
    const Status slice = SetThreadLatencySlice(options_.output_thread_slice_us);
    if (!slice.ok()) DI_LOG(kDebug, "engine: output thread keeps the default time slice").Field("why", slice.message());
  }
  std::deque<OutputEvent> batch;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(shard->mutex);
      shard->cv.wait(lock, [&] { return shard->stop || !shard->queue.empty(); });
      if (shard->queue.empty() && shard->stop) return;
      batch.swap(shard->queue);
    }
    for (OutputEvent& e : batch) Deliver(e);
    batch.clear();
  }
}

void EngineImpl::Deliver(OutputEvent& event) {
  OutputRequest& o = *event.request;
  if (o.done) return;
  o.hit_tokens = event.hit_tokens;
  const tokenizer::Tokenizer* tok = options_.tokenizer;
  RequestUpdate u;
  u.id = o.id;
  u.prompt_tokens = o.prompt_tokens;
  u.prompt_cache_hit_tokens = o.hit_tokens;
  u.seed = o.seed;
  u.emitted_nanos = event.posted_nanos;
  std::vector<int> stopped;  // outputs this thread finished on a stop string
  for (SeqEvent& se : event.seqs) {
    OutputSequence& os = o.seqs[static_cast<size_t>(se.index)];
    if (os.finished) continue;
    SequenceDelta d;
    d.index = se.index;
    for (sampling::SampledToken& t : se.tokens) {
      GeneratedToken g;
      g.id = t.id;
      g.logprob = t.logprob;
      if (o.text) {
        g.bytes = std::string(tok->TokenBytes(t.id));
        g.control = tok->IsAddedToken(t.id);
      }
      for (const sampling::TopLogprob& alt : t.top) {
        TokenAlternative a;
        a.id = alt.id;
        a.logprob = alt.logprob;
        if (o.text) a.bytes = std::string(tok->TokenBytes(alt.id));
        g.top_logprobs.push_back(std::move(a));
      }
      d.tokens.push_back(std::move(g));
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
    std::lock_guard<std::mutex> lock(inbox_mutex_);
    for (int index : stopped) output_stops_.push_back({o.id, index});
    inbox_cv_.notify_one();
  }
  if (u.sequences.empty() && !u.finished) return;
  o.callback(std::move(u));
}

}  // namespace deepinfer::engine
