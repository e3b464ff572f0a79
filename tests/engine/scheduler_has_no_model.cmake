# The scheduler meets the executor only through engine/step_plan.h: its files (and that header) include no
# model header and the executor's header, and name no model type; the executor's files include no
# scheduler header. Run by the ctest engine_scheduler_has_no_model with -DSOURCE_DIR=<repository root>.
set(files
  src/engine/step_plan.h
  src/engine/scheduler.h
  src/engine/scheduler.cpp
  src/engine/scheduler_update.cpp
  src/engine/tier_loading.cpp
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
if(problems)
  message(FATAL_ERROR "the scheduler and the executor meet outside engine/step_plan.h:${problems}")
endif()
message(STATUS "scheduler files checked: ${files}")
