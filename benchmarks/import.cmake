# bench_import: streaming import of a generated >= 1 GB Kineto trace (speed and peak memory).
npuscope_add_benchmark(bench_import SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/bench_import.cpp LIBS npuscope::import)
