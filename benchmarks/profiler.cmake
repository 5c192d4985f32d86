# bench_profiler: recording overhead, writer throughput, op-table time over 10M ops, new trace files.
npuscope_add_benchmark(bench_profiler SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/bench_profiler.cpp
                       LIBS npuscope::profiler PCH torch)
target_compile_definitions(bench_profiler PRIVATE NPUSCOPE_SCHEMA_DIR="${PROJECT_SOURCE_DIR}/core/schema")
