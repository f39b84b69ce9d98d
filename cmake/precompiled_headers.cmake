# Precompiled headers: what most translation units parse again and again (the standard library,
# fmt, nlohmann/json, GoogleTest) is parsed once per build (docs/performance.md, "Build and test
# times", measured the gain). A PCH target owns one; a target with the same compile flags reuses it
# (REUSE_FROM). Configure with -DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON to check that every file
# includes what it uses.

set(VMM_PCH_STD <algorithm> <array> <atomic> <chrono> <condition_variable> <cstdint> <cstring> <deque>
                <functional> <map> <memory> <mutex> <optional> <set> <span> <string> <string_view> <thread>
                <unordered_map> <utility> <variant> <vector>)

# vmm_pch_target(NAME HEADERS ... LIBS ... [PIC]): a static library of one empty file that owns the
# precompiled HEADERS, compiled as targets linking LIBS are.
function(vmm_pch_target name)
  cmake_parse_arguments(P "PIC" "" "HEADERS;LIBS;OPTIONS" ${ARGN})
  file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/pch/${name}.cc
       CONTENT "// The anchor of the precompiled header ${name} (cmake/precompiled_headers.cmake).\n")
  add_library(${name} STATIC ${CMAKE_BINARY_DIR}/pch/${name}.cc)
  target_link_libraries(${name} PRIVATE ${P_LIBS} vmm_warnings)
  target_compile_options(${name} PRIVATE ${P_OPTIONS})
  target_precompile_headers(${name} PRIVATE ${P_HEADERS})
  set_target_properties(${name} PROPERTIES POSITION_INDEPENDENT_CODE ${P_PIC})
endfunction()

# vmm_program(NAME SOURCE FILE LIBS ... [DEFINES ...]): an executable of one source (a command
# line), compiled as an object library that is position-independent like the layers, so that it
# reuses their precompiled header with nlohmann/json instead of parsing it all again (vmmd's
# main.cc took 9 s alone), at VMM_COLD_OPTIMIZE (CLI11's templates run once).
function(vmm_program name)
  cmake_parse_arguments(P "" "SOURCE" "LIBS;DEFINES" ${ARGN})
  add_library(${name}_main OBJECT ${P_SOURCE})
  set_target_properties(${name}_main PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_precompile_headers(${name}_main REUSE_FROM vmm_pch_json)
  target_compile_options(${name}_main PRIVATE ${VMM_COLD_OPTIMIZE})
  target_compile_definitions(${name}_main PRIVATE ${P_DEFINES})
  target_link_libraries(${name}_main PRIVATE ${P_LIBS} vmm_warnings)
  add_executable(${name} $<TARGET_OBJECTS:${name}_main>)
  target_link_libraries(${name} PRIVATE ${P_LIBS})
endfunction()
