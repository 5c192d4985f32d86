# bench_dump: full tensor dumps vs the disk's sequential write bandwidth; stats-only dumping vs none.
npuscope_add_benchmark(bench_dump SOURCES ${CMAKE_CURRENT_LIST_DIR}/bench_dump.cpp
                       LIBS npuscope::dumper PCH torch)
