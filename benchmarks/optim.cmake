# bench_optim: fused optimizers vs torch::optim vs STREAM triad, all in one run.
npuscope_add_benchmark(bench_optim SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/bench_optim.cpp
                       LIBS npuscope::optim PCH torch)
