# Engine fuzzer: requests read from untrusted JSON (engine/request_codec.h).
deepinfer_add_fuzzer(engine_request_codec fuzz_engine_request_codec.cpp deepinfer_engine deepinfer_core)
# --speculative-config's JSON (engine/speculative_config.h).
deepinfer_add_fuzzer(engine_speculative_config fuzz_engine_speculative_config.cpp deepinfer_engine deepinfer_core)
