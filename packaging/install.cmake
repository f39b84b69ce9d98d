# Installation (`cmake --install build [--prefix P]`) and the Debian package (`cpack -G DEB` in the
# build directory). The layout is the one vmm and vmmd search at run time, relative to the prefix
# of the binary that runs (vmm/common/search_path.h), so any prefix works unchanged:
#   bin/vmm, bin/vmmctl, bin/vmm-snapshot, bin/vmmd
#   lib/vmm/vmm-transport-rdma.so       the RDMA transport plugin
#   share/vmm/guest/*.elf               the guest payloads (--guest NAME, <kernel>NAME</kernel>)
#   share/vmm/configs/*.toml            example configurations
#   share/doc/vmm/                      README, the manual (docs/*.md)
#   lib/systemd/system/vmmd.service     the daemon as a service (root: vmm:///system)
include(GNUInstallDirs)

install(TARGETS vmm vmmctl vmm-snapshot RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET vmmd)
  install(TARGETS vmmd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  # The unit names the installed vmmd, so it is written at install time, for the prefix of that
  # install (cpack installs with /usr; cmake --install with --prefix or CMAKE_INSTALL_PREFIX).
  install(CODE "
    set(bindir \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}\")
    set(docdir \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DOCDIR}\")
    configure_file(\"${PROJECT_SOURCE_DIR}/packaging/vmmd.service.in\" \"${CMAKE_BINARY_DIR}/packaging/vmmd.service\" @ONLY)")
  install(FILES ${CMAKE_BINARY_DIR}/packaging/vmmd.service DESTINATION lib/systemd/system)
endif()
if(TARGET vmm-transport-rdma)
  install(TARGETS vmm-transport-rdma LIBRARY DESTINATION lib/vmm)
endif()
install(DIRECTORY ${CMAKE_BINARY_DIR}/guest/ DESTINATION share/vmm/guest FILES_MATCHING PATTERN "*.elf")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/configs/ DESTINATION share/vmm/configs FILES_MATCHING PATTERN "*.toml")
# The README and the manual it points to (docs/*.md; not the dated lab notes under docs/history/).
file(GLOB vmm_manual ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${vmm_manual} DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(CPACK_PACKAGE_NAME vmm)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "vmm developers <vmm@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "small KVM virtual machine monitor built for live migration over RDMA")
set(CPACK_PACKAGE_DESCRIPTION "vmm runs KVM guests and live-migrates them over TCP, unix sockets, multifd \
and RDMA (a run-time plugin on rdma-core, wire-compatible with QEMU's). vmmd serves libvirt's remote \
protocol, so that stock virsh and libvirt's client library manage and migrate vmm domains (vmm:///system).")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # Depends from the libraries the binaries and the plugin link
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libvirt-clients")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "rdma-core, ibverbs-providers")
include(CPack)
