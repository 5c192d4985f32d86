# bench_profiler: recording overhead, writer throughput, op-table time over 10M ops, new trace files.
npuscope_add_benchmark(bench_profiler SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/bench_profiler.cpp
                       LIBS npuscope::workloads npuscope::analysis SQLite::SQLite3 PCH torch)
target_compile_definitions(bench_profiler PRIVATE NPUSCOPE_SCHEMA_DIR="${PROJECT_SOURCE_DIR}/store/schema")
# The recorder's op path alone (profiler/src/op_recorder.h, not part of its public API).
target_include_directories(bench_profiler PRIVATE ${PROJECT_SOURCE_DIR}/profiler)
