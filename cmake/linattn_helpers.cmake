# linattn_add_library(name SOURCES ... DEPS ...): one static library per src/ folder.
# A folder whose sources are not written yet still yields an (empty) interface target so that
# upper levels can link it unconditionally.
function(linattn_add_library name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS" ${ARGN})
  if(A_SOURCES)
    add_library(${name} STATIC ${A_SOURCES})
    target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${name} PUBLIC ${A_DEPS} PRIVATE linattn_warnings linattn_arch)
  else()
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
    target_link_libraries(${name} INTERFACE ${A_DEPS})
  endif()
endfunction()

# linattn_glob(var dir): the .cc files of one folder (each folder owns its list).
function(linattn_glob var dir)
  file(GLOB _srcs CONFIGURE_DEPENDS ${dir}/*.cc)
  set(${var} ${_srcs} PARENT_SCOPE)
endfunction()
