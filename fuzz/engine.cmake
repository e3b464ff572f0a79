# Engine fuzzer: requests read from untrusted JSON (engine/request_codec.h).
deepinfer_add_fuzzer(engine_request_codec fuzz_engine_request_codec.cpp deepinfer_engine deepinfer_core)
