# Installs the library, its headers and a CMake package so that
#   find_package(weft) ; target_link_libraries(app PRIVATE weft::weft)
# works from another project.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS weft EXPORT weftTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/weft DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT weftTargets NAMESPACE weft:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
configure_package_config_file(cmake/weftConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/weftConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/weftConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/weftConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/weftConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
if(WEFT_BUILD_TOOLS)
  install(TARGETS weft_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  if(TARGET weft_bench_cli)  # weft-bench beside weft: `weft bench cpu` runs it from there
    install(TARGETS weft_bench_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endif()
