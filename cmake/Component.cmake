# The layering (the README's dependency graph), enforced when configuring:
#
# deepinfer_declare_component(name [DEPS dep...]) declares src/<name> and the components its code may use
# directly (their own dependencies come along transitively). The top-level CMakeLists.txt declares every
# component, one line each, in dependency order: a dependency must be declared before the component that
# names it, so the graph cannot have a cycle, and naming an undeclared or later component is a configure
# error. A declared component whose src/<name>/ does not exist (yet) is skipped, but depending on it is an
# error. The ctest `layering` (cmake/CheckLayering.cmake) then checks that every #include between components
# follows these declarations and that the declarations stay within the README's graph.
function(deepinfer_declare_component name)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  get_property(declared GLOBAL PROPERTY DEEPINFER_DECLARED_COMPONENTS)
  if(name IN_LIST declared)
    message(FATAL_ERROR "component '${name}' is declared twice")
  endif()
  set(closure)
  foreach(dep IN LISTS ARG_DEPS)
    if(dep STREQUAL name)
      message(FATAL_ERROR "component '${name}' lists itself as a dependency")
    endif()
    if(NOT dep IN_LIST declared)
      message(FATAL_ERROR "component '${name}' depends on '${dep}', which is not declared before it: declare "
                          "components in dependency order (CMakeLists.txt, deepinfer_declare_component)")
    endif()
    get_property(dep_closure GLOBAL PROPERTY DEEPINFER_CLOSURE_${dep})
    list(APPEND closure ${dep} ${dep_closure})
  endforeach()
  list(REMOVE_DUPLICATES closure)
  set_property(GLOBAL APPEND PROPERTY DEEPINFER_DECLARED_COMPONENTS ${name})
  set_property(GLOBAL PROPERTY DEEPINFER_DEPS_${name} "${ARG_DEPS}")
  set_property(GLOBAL PROPERTY DEEPINFER_CLOSURE_${name} "${closure}")
endfunction()

# Adds every declared component that has a src/<name>/CMakeLists.txt, in declaration order, and writes the
# declarations to ${PROJECT_BINARY_DIR}/layering.cmake for the include check.
function(deepinfer_add_components)
  get_property(declared GLOBAL PROPERTY DEEPINFER_DECLARED_COMPONENTS)
  set(present)
  set(out "# Written by deepinfer_add_components (cmake/Component.cmake); read by cmake/CheckLayering.cmake.\n")
  foreach(c IN LISTS declared)
    get_property(deps GLOBAL PROPERTY DEEPINFER_DEPS_${c})
    get_property(closure GLOBAL PROPERTY DEEPINFER_CLOSURE_${c})
    if(EXISTS ${PROJECT_SOURCE_DIR}/src/${c}/CMakeLists.txt)
      foreach(dep IN LISTS deps)
        if(NOT dep IN_LIST present)
          message(FATAL_ERROR "component '${c}' depends on '${dep}', but src/${dep}/ does not exist")
        endif()
      endforeach()
      list(APPEND present ${c})
    endif()
    string(APPEND out "set(DEEPINFER_DEPS_${c} \"${deps}\")\nset(DEEPINFER_CLOSURE_${c} \"${closure}\")\n")
  endforeach()
  file(GLOB dirs RELATIVE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/src/*)
  foreach(d IN LISTS dirs)
    if(IS_DIRECTORY ${PROJECT_SOURCE_DIR}/src/${d} AND NOT d IN_LIST declared)
      message(FATAL_ERROR "src/${d}/ is not a declared component: add deepinfer_declare_component(${d} DEPS ...) "
                          "to CMakeLists.txt")
    endif()
  endforeach()
  string(APPEND out "set(DEEPINFER_COMPONENTS \"${declared}\")\nset(DEEPINFER_PRESENT_COMPONENTS \"${present}\")\n")
  file(WRITE ${PROJECT_BINARY_DIR}/layering.cmake "${out}")
  set_property(GLOBAL PROPERTY DEEPINFER_PRESENT_COMPONENTS "${present}")
  foreach(c IN LISTS present)
    add_subdirectory(${PROJECT_SOURCE_DIR}/src/${c} ${PROJECT_BINARY_DIR}/src/${c})
  endforeach()
endfunction()

# deepinfer_glob_component(name DEPS deps...): a component library made of every .cpp in the current source
# directory (and its cpu/ subfolder). Files named *_avx2.cpp, *_avx512.cpp or *_avx512bf16.cpp are compiled
# for that instruction set only (see Isa.cmake); the code must reach them through a run-time dispatch.
# Its dependencies are the declared ones (deepinfer_declare_component); DEPS, if given, must be among them.
function(deepinfer_glob_component name)
  cmake_parse_arguments(ARG "" "" "DEPS" ${ARGN})
  get_property(declared_deps GLOBAL PROPERTY DEEPINFER_DEPS_${name})
  get_property(closure GLOBAL PROPERTY DEEPINFER_CLOSURE_${name})
  foreach(dep IN LISTS ARG_DEPS)
    if(NOT dep IN_LIST closure)
      message(FATAL_ERROR "src/${name}/CMakeLists.txt names '${dep}', which component '${name}' does not declare "
                          "(CMakeLists.txt: deepinfer_declare_component(${name} DEPS ${declared_deps}))")
    endif()
  endforeach()
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp ${CMAKE_CURRENT_SOURCE_DIR}/cpu/*.cpp)
  set(plain)
  set(isa_avx2)
  set(isa_avx512)
  set(isa_avx512bf16)
  foreach(s IN LISTS sources)
    if(s MATCHES "_avx512bf16\\.cpp$")
      list(APPEND isa_avx512bf16 ${s})
    elseif(s MATCHES "_avx512\\.cpp$")
      list(APPEND isa_avx512 ${s})
    elseif(s MATCHES "_avx2\\.cpp$")
      list(APPEND isa_avx2 ${s})
    else()
      list(APPEND plain ${s})
    endif()
  endforeach()
  if(NOT sources)
    return()  # the component has no sources yet
  endif()
  deepinfer_add_library(${name} ${plain})
  foreach(isa avx2 avx512 avx512bf16)
    if(isa_${isa})
      deepinfer_isa_sources(deepinfer_${name} ${isa} ${isa_${isa}})
    endif()
  endforeach()
  target_link_libraries(deepinfer_${name} PUBLIC deepinfer_core)
  foreach(dep IN LISTS declared_deps)
    target_link_libraries(deepinfer_${name} PUBLIC deepinfer_${dep})
  endforeach()
endfunction()

# deepinfer_glob_tests(component [LIBS ...]): the *_test.cpp files in the current directory are the
# component's tests. The unit tests form one executable, <component>_tests (compiled in batches of sixteen:
# see deepinfer_unity), each GoogleTest case (the whole executable with DEEPINFER_TEST_PER_CASE off) a ctest
# test of the "unit" label; a file ending in _slow_test.cpp is
# an executable of its own, <component>_<stem>, labelled "slow" (Release pass only: the sanitizer build,
# which runs the unit label, does not build them).
function(deepinfer_glob_tests component)
  cmake_parse_arguments(ARG "" "" "LIBS" ${ARGN})
  file(GLOB tests CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cpp)
  set(unit_sources)
  foreach(t IN LISTS tests)
    get_filename_component(stem ${t} NAME_WE)
    if(stem MATCHES "_slow_test$")
      if(NOT DEEPINFER_SANITIZE)
        deepinfer_add_test(${component}_${stem} SOURCES ${t} LIBS deepinfer_${component} ${ARG_LIBS} LABELS slow)
      endif()
    else()
      list(APPEND unit_sources ${t})
    endif()
  endforeach()
  if(unit_sources)
    deepinfer_add_test(${component}_tests SOURCES ${unit_sources} LIBS deepinfer_${component} ${ARG_LIBS}
                       LABELS unit)
    # A test file's own code is small beside the GoogleTest and project headers it shares with its
    # neighbours, so a component's tests compile in batches of sixteen, most components' in one.
    deepinfer_unity(${component}_tests BATCH_SIZE 16)
  endif()
endfunction()
