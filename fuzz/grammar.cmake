# Grammar fuzzers: the regex, EBNF and JSON Schema front ends and the strict tool-call grammar, each followed
# by a matcher run.
foreach(kind regex ebnf json_schema tool_calls)
  deepinfer_add_fuzzer(grammar_${kind} fuzz_grammar_${kind}.cpp deepinfer_grammar)
  target_include_directories(fuzz_grammar_${kind} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
endforeach()
