# Model fuzzers: the DeepSeek-V4 config.json reader on arbitrary documents.
deepinfer_add_fuzzer(model_config fuzz_model_config.cpp deepinfer_model)
