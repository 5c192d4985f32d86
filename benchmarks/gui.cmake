# bench_gui: opening a 1M-op trace and painting its timeline, and repaint time after zoom/pan,
# offscreen (QT_QPA_PLATFORM=offscreen is set by the benchmark itself).
if(TARGET npuscope_gui_lib)
  npuscope_add_benchmark(bench_gui SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/bench_gui.cpp LIBS npuscope_gui_lib)
  target_include_directories(bench_gui PRIVATE ${PROJECT_SOURCE_DIR}/tests/gui)
endif()
