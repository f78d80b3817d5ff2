# cmake -DSOURCE_DIR=... -DLINKS_ACROSS=a|b -P check_layers.cmake
# Fails when a file under server/ includes the client library (client/...,
# or a public header of client/include) or a file under client/ includes
# server/..., and reports the links across that CMakeLists.txt found.

cmake_minimum_required(VERSION 3.22)

set(violations)
if(LINKS_ACROSS)
  string(REPLACE "|" ";" links "${LINKS_ACROSS}")
  foreach(link ${links})
    list(APPEND violations "links ${link}")
  endforeach()
endif()

# The #includes of the C++ files under `layer` that name a file of `other`.
function(check_includes layer other out)
  set(found ${${out}})
  file(GLOB_RECURSE files LIST_DIRECTORIES false
       ${SOURCE_DIR}/${layer}/*.h ${SOURCE_DIR}/${layer}/*.cc
       ${SOURCE_DIR}/${layer}/*.cu ${SOURCE_DIR}/${layer}/*.cuh)
  foreach(file ${files})
    file(RELATIVE_PATH rel ${SOURCE_DIR} ${file})
    file(STRINGS ${file} lines REGEX "^[ \t]*#[ \t]*include[ \t]*[\"<]")
    foreach(line ${lines})
      string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*[\"<]([^\">]*)[\">].*$"
                           "\\1" included "${line}")
      string(FIND "${included}" "${other}/" at)
      # The client library's public headers are included as "ferry/...".
      if(NOT at EQUAL 0 AND NOT (other STREQUAL "client" AND
                                 EXISTS ${SOURCE_DIR}/client/include/${included}))
        continue()
      endif()
      list(APPEND found "${rel} includes ${included}")
    endforeach()
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

check_includes(server client violations)
check_includes(client server violations)

if(violations)
  list(JOIN violations "\n  " text)
  message(FATAL_ERROR "server/ and client/ must not use each other:\n  ${text}")
endif()
message(STATUS "server/ and client/ are apart")
