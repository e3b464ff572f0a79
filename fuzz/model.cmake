# Model fuzzers: the DeepSeek-V3 and V4 config.json readers on arbitrary documents.
deepinfer_add_fuzzer(model_config fuzz_model_config.cpp deepinfer_model)
# DeepSeek-V4.1: its config.json reader, and the Engram token map built from a tokenizer.json.
deepinfer_add_fuzzer(v41_config fuzz_v41_config.cpp deepinfer_model)
deepinfer_add_fuzzer(v41_engram_vocab fuzz_v41_engram_vocab.cpp deepinfer_model)
# Checkpoint loading end to end: a packed model directory in, LoadCausalLM out (seeds: a tiny model and its
# broken variants, written by tools/hostile/gen_corpus.py into the hostile corpus's fuzz/model_checkpoint).
deepinfer_add_fuzzer(model_checkpoint fuzz_model_checkpoint.cpp deepinfer_model)
