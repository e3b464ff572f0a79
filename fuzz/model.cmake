# Model fuzzers: the DeepSeek-V4 config.json reader on arbitrary documents.
deepinfer_add_fuzzer(model_config fuzz_model_config.cpp deepinfer_model)
# DeepSeek-V4.1: its config.json reader, and the Engram token map built from a tokenizer.json.
deepinfer_add_fuzzer(v41_config fuzz_v41_config.cpp deepinfer_model)
deepinfer_add_fuzzer(v41_engram_vocab fuzz_v41_engram_vocab.cpp deepinfer_model)
