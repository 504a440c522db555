# A doc's first ```cpp block (or its first after the line -DAFTER names) must be the code of
# the example that the tests build and run (the example file less its opening comment lines),
# so that the doc cannot drift from compiling code. Run by ctest (apps/CMakeLists.txt):
#   cmake -DDOC=docs/cpu.md -DEXAMPLE=apps/examples/cpu_executor.cpp -P check_doc_example.cmake
foreach(var DOC EXAMPLE)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_doc_example.cmake: -D${var}=... is required")
  endif()
endforeach()

file(READ "${DOC}" doc)
# With -DAFTER=<a line of the doc>: the first ```cpp block after that line.
if(DEFINED AFTER)
  string(FIND "${doc}" "${AFTER}\n" after)
  if(after EQUAL -1)
    message(FATAL_ERROR "${DOC} has no line '${AFTER}'")
  endif()
  string(SUBSTRING "${doc}" ${after} -1 doc)
endif()
string(FIND "${doc}" "```cpp\n" open)
if(open EQUAL -1)
  message(FATAL_ERROR "${DOC} has no ```cpp block")
endif()
math(EXPR open "${open} + 7")
string(SUBSTRING "${doc}" ${open} -1 rest)
string(FIND "${rest}" "\n```" close)
if(close EQUAL -1)
  message(FATAL_ERROR "${DOC}: the first ```cpp block is not closed")
endif()
string(SUBSTRING "${rest}" 0 ${close} block)

file(READ "${EXAMPLE}" code)
string(REGEX REPLACE "^(//[^\n]*\n)+" "" code "${code}")
string(REGEX REPLACE "\n+$" "" code "${code}")

if(NOT block STREQUAL code)
  file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/doc_block.txt" "${block}\n")
  file(WRITE "${CMAKE_CURRENT_BINARY_DIR}/example_code.txt" "${code}\n")
  execute_process(COMMAND diff "${CMAKE_CURRENT_BINARY_DIR}/doc_block.txt"
                          "${CMAKE_CURRENT_BINARY_DIR}/example_code.txt")
  message(FATAL_ERROR "${DOC}'s first ```cpp block differs from ${EXAMPLE} (diff above: < doc, > example)")
endif()
message(STATUS "${DOC}'s example matches ${EXAMPLE}")
