# bench_profiler: recording overhead, writer throughput, op-table time over 10M ops.
npuscope_add_benchmark(bench_profiler SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/bench_profiler.cpp
                       LIBS npuscope::profiler PCH torch)
