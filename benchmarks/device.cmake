npuscope_add_benchmark(bench_device SOURCES bench_device.cpp LIBS npuscope::device PCH torch)
