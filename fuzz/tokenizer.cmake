# Tokenizer fuzzers: encode/decode of arbitrary bytes with the DeepSeek-V3 tokenizer, and the tokenizer.json
# loader on arbitrary documents.
deepinfer_add_fuzzer(tokenizer_encode fuzz_tokenizer_encode.cpp deepinfer_tokenizer)
deepinfer_add_fuzzer(tokenizer_json fuzz_tokenizer_json.cpp deepinfer_tokenizer)
