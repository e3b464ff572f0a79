# Server fuzzer: routing, headers and the server's own request bodies through Service::Handle.
deepinfer_add_fuzzer(server_request fuzz_server_request.cpp deepinfer_server deepinfer_tokenizer deepinfer_core)
