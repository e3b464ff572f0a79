# deepinfer_target_warnings(target): the project's warning set, errors in CI (DEEPINFER_WERROR).
function(deepinfer_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                         -Wimplicit-fallthrough -Wno-missing-field-initializers)
  if(DEEPINFER_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# deepinfer_add_library(name SOURCES...): a component library deepinfer_<name>, headers included as
# "<component>/<header>.h" from src/.
function(deepinfer_add_library name)
  add_library(deepinfer_${name} STATIC ${ARGN})
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
  target_compile_definitions(${name} PRIVATE DEEPINFER_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)  # "support/require_data.h"
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  gtest_discover_tests(${name} PROPERTIES LABELS "${ARG_LABELS}" DISCOVERY_TIMEOUT 60)
endfunction()
