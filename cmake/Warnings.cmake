# deepinfer_target_warnings(target): the project's warning set, errors in CI (DEEPINFER_WERROR).
function(deepinfer_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                         -Wimplicit-fallthrough -Wno-missing-field-initializers)
  # clang checks the locking that core/mutex.h's annotations declare (GUARDED_BY, REQUIRES, ...).
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    target_compile_options(${target} PRIVATE -Wthread-safety -Werror=thread-safety)
  endif()
  if(DEEPINFER_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# deepinfer_unity(target [BATCH_SIZE n]): with DEEPINFER_UNITY_BUILD, the target's sources are compiled in
# batches of up to DEEPINFER_UNITY_BATCH_SIZE files (n with BATCH_SIZE), one translation unit each. Most of a
# file's compile time is spent instantiating and generating the same templates (nlohmann::json, GoogleTest, the
# standard containers) as its neighbours; a batch does that once, which halves a full build. So names at file
# scope (anonymous namespaces, statics) must be unique within a target (a component's library or tests, the
# deepinfer executable's subcommands, the bench targets): a clash is a redefinition error in the batch.
function(deepinfer_unity target)
  cmake_parse_arguments(ARG "" "BATCH_SIZE" "" ${ARGN})
  if(NOT ARG_BATCH_SIZE)
    set(ARG_BATCH_SIZE ${DEEPINFER_UNITY_BATCH_SIZE})
  endif()
  if(DEEPINFER_UNITY_BUILD)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE BATCH
                          UNITY_BUILD_BATCH_SIZE ${ARG_BATCH_SIZE})
    # gcc takes an included .cpp for a header, and warns when a class of its has a member whose type is in
    # its anonymous namespace: legitimate in a .cpp, compiled as one.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(${target} PRIVATE -Wno-subobject-linkage)
    endif()
  endif()
endfunction()

# deepinfer_add_library(name SOURCES...): a component library deepinfer_<name>, headers included as
# "<component>/<header>.h" from src/.
function(deepinfer_add_library name)
  add_library(deepinfer_${name} STATIC ${ARGN})
  deepinfer_unity(deepinfer_${name})
  target_include_directories(deepinfer_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  deepinfer_target_warnings(deepinfer_${name})
  set_property(GLOBAL APPEND PROPERTY DEEPINFER_LIBRARIES deepinfer_${name})
endfunction()

# deepinfer_add_test(name SOURCES... LIBS libs...): a GoogleTest executable registered with ctest.
# Tests are labelled "unit" unless LABELS says otherwise; the sanitizer pass runs the unit label.
function(deepinfer_add_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  deepinfer_target_warnings(${name})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_options(${name} PRIVATE ${DEEPINFER_TEST_COMPILE_OPTIONS})  # CMakeLists.txt says why
  # DEEPINFER_PCH: the headers nearly every test file includes are compiled once, by the first test executable,
  # and reused by the others (their compile options are the same).
  if(DEEPINFER_PCH)
    get_property(pch_owner GLOBAL PROPERTY DEEPINFER_TEST_PCH_OWNER)
    if(pch_owner)
      target_precompile_headers(${name} REUSE_FROM ${pch_owner})
    else()
      target_precompile_headers(${name} PRIVATE <gtest/gtest.h> <nlohmann/json.hpp> <algorithm> <atomic> <chrono>
                                <cmath> <cstdint> <cstring> <filesystem> <fstream> <functional> <map> <memory>
                                <mutex> <optional> <random> <span> <string> <string_view> <thread> <unordered_map>
                                <vector>)
      set_property(GLOBAL PROPERTY DEEPINFER_TEST_PCH_OWNER ${name})
    endif()
  endif()
  target_compile_definitions(${name} PRIVATE DEEPINFER_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)  # "support/require_data.h"
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  if(DEEPINFER_TEST_PER_CASE)
    gtest_discover_tests(${name} PROPERTIES LABELS "${ARG_LABELS}" DISCOVERY_TIMEOUT 60)
  else()
    # The whole executable is one test: what its cases share (a tokenizer, a model built from a preset) is
    # loaded once instead of once per case. It runs every case, so it may take far longer than one case.
    add_test(NAME ${name} COMMAND ${name} --gtest_brief=1)
    set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT 3600)
  endif()
endfunction()
