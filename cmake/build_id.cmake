# Writes OUT (a C header defining HS_BUILD_ID as "<git describe --always
# --dirty> <BUILD_TYPE>") at every build, touching it only when the text
# changes, so that benchmark reports name the commit the binary was built
# from rather than the one the build was configured at.
#   cmake -DSRC=<source dir> -DOUT=<header> -DBUILD_TYPE=<type> -P build_id.cmake
execute_process(COMMAND git describe --always --dirty WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE id OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT id)
  set(id "unknown")
endif()
set(text "#define HS_BUILD_ID \"${id} ${BUILD_TYPE}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
