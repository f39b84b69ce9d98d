// Compiled once per layer check (tests/layers/CMakeLists.txt): one header, seen from one layer.
#include VMM_CHECK_HEADER
