# Kernels are compiled once per instruction set and chosen at run time (core/cpu_features.h).
# deepinfer_isa_sources(target ISA sources...) compiles the sources with that ISA's flags only;
# callers must reach them through a dispatch that checks cpu_features() first.
set(DEEPINFER_ISA_FLAGS_avx2 -mavx2 -mfma -mf16c -mbmi2)
set(DEEPINFER_ISA_FLAGS_avx512 -mavx512f -mavx512bw -mavx512dq -mavx512vl -mavx2 -mfma -mf16c -mbmi2)
set(DEEPINFER_ISA_FLAGS_avx512bf16 ${DEEPINFER_ISA_FLAGS_avx512} -mavx512bf16 -mavx512vnni)
function(deepinfer_isa_sources target isa)
  if(NOT DEFINED DEEPINFER_ISA_FLAGS_${isa})
    message(FATAL_ERROR "unknown ISA '${isa}' (known: avx2 avx512 avx512bf16)")
  endif()
  target_sources(${target} PRIVATE ${ARGN})
  set_source_files_properties(${ARGN} TARGET_DIRECTORY ${target} PROPERTIES
                              COMPILE_OPTIONS "${DEEPINFER_ISA_FLAGS_${isa}}" SKIP_UNITY_BUILD_INCLUSION ON)
endfunction()
