# The scheduler meets the executor only through engine/step_plan.h: its files (and that header) include no
# model header and the executor's header, and name no model type; the executor's files include no
# scheduler header. With -DCXX=<compiler>, the headers the scheduler's headers pull in (transitively) are
# checked too. Run by the ctest engine_scheduler_has_no_model with -DSOURCE_DIR=<repository root>.
set(files
  src/engine/step_plan.h
  src/engine/scheduler.h
  src/engine/scheduler.cpp
  src/engine/scheduler_update.cpp
  src/engine/tier_loading.cpp
  src/engine/verify_schedule.cpp
  src/engine/verify_budget.h
  src/engine/verify_budget.cpp
  src/engine/cost_model.h
  src/engine/cost_model.cpp)
set(problems "")
foreach(f IN LISTS files)
  if(NOT EXISTS ${SOURCE_DIR}/${f})
    string(APPEND problems "\n  ${f}: missing (update this list when the scheduler's files change)")
    continue()
  endif()
  file(STRINGS ${SOURCE_DIR}/${f} lines)
  set(n 0)
  foreach(line IN LISTS lines)
    math(EXPR n "${n} + 1")
    if(line MATCHES "^[ \t]*#[ \t]*include[ \t]*[<\"](model/|engine/executor\\.h|engine/engine_impl\\.h)")
      string(APPEND problems "\n  ${f}:${n}: ${line}")
    elseif(line MATCHES "model::|CausalLM|KvPools|SequenceState")
      string(APPEND problems "\n  ${f}:${n}: ${line}")
    endif()
  endforeach()
endforeach()
foreach(f IN ITEMS src/engine/executor.h src/engine/local_executor.cpp)
  if(NOT EXISTS ${SOURCE_DIR}/${f})
    string(APPEND problems "\n  ${f}: missing (update this list when the executor's files change)")
    continue()
  endif()
  file(STRINGS ${SOURCE_DIR}/${f} lines REGEX "^[ \t]*#[ \t]*include")
  foreach(line IN LISTS lines)
    if(line MATCHES "engine/(scheduler|engine_impl|output_processor)\\.h")
      string(APPEND problems "\n  ${f}: ${line}")
    endif()
  endforeach()
endforeach()
if(CXX)
  foreach(header IN ITEMS engine/step_plan.h engine/scheduler.h)
    execute_process(COMMAND ${CXX} -std=c++20 -I${SOURCE_DIR}/src -M -x c++ ${SOURCE_DIR}/src/${header}
                    OUTPUT_VARIABLE deps ERROR_VARIABLE errors RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      string(APPEND problems "\n  ${header}: the preprocessor failed: ${errors}")
    elseif(deps MATCHES "src/model/[A-Za-z0-9_]+\\.h|engine/executor\\.h")
      string(APPEND problems "\n  ${header} pulls in ${CMAKE_MATCH_0}")
    endif()
  endforeach()
endif()
if(problems)
  message(FATAL_ERROR "the scheduler and the executor meet outside engine/step_plan.h:${problems}")
endif()
message(STATUS "scheduler files checked: ${files}")
