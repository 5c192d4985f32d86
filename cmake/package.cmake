# `cmake --install build --prefix P` and `cpack -G DEB` (run in build/): the CLI, the GUI, the
# Python package (P/lib/python3.X/dist-packages, on Debian's sys.path for P = /usr and /usr/local),
# the docs and a desktop entry. The .deb's dependencies are Debian package names:
# dpkg-shlibdeps derives them from the binaries' libraries; what is loaded otherwise is listed.
install(FILES README.md DESTINATION share/doc/npuscope)
install(DIRECTORY docs/ DESTINATION share/doc/npuscope/docs)

set(CPACK_PACKAGE_NAME npuscope)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "npuscope")
set(CPACK_PACKAGE_CONTACT "npuscope developers <npuscope@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Profiler and debugger of mixed-precision training on an emulated Ascend-style NPU")
set(CPACK_PACKAGE_DESCRIPTION
    "Trains PyTorch models on an emulated NPU (a libtorch PrivateUse1 device) under apex-style AMP and
fused optimizers, records per-op timings, loss-scale history, overflows and tensor dumps into
SQLite, imports Kineto and torch_npu traces, and shows it all in a CLI and a Qt5 workbench.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_STRIP_FILES ON)  # RelWithDebInfo binaries: 261 MB installed unstripped
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Our own shared library (the device) is found in the build tree, not in a package.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR}/device)
# Loaded without a link: the Python package imports torch; libtorch calls BLAS through
# libblas.so.3, which must be OpenBLAS's OpenMP build (scripts/install-deps.sh explains).
set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3 (>= 3.11), python3-torch (>= 1.13), libopenblas0-openmp")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "dataset-fashion-mnist, python3-torchvision")
# Python's byte-code beside the modules goes with the package (py3clean, as Debian's own do).
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_LIST_DIR}/deb/prerm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
