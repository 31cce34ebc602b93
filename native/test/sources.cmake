# Engine unit tests: one executable per file, registered with ctest. Fixture paths are passed as arguments.
set(ENGINE_REPO_ROOT ${CMAKE_CURRENT_LIST_DIR}/../..)
function(engine_test name)
  add_executable(${name} ${CMAKE_CURRENT_LIST_DIR}/${name}.cpp ${CMAKE_CURRENT_LIST_DIR}/check.h)
  target_link_libraries(${name} PRIVATE engine)
  add_test(NAME ${name} COMMAND ${name} ${ENGINE_REPO_ROOT})
endfunction()
include(${CMAKE_CURRENT_LIST_DIR}/model-tests.cmake)
include(${CMAKE_CURRENT_LIST_DIR}/executor-tests.cmake)
