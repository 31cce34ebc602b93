# The Node addon: the only files that include napi.h.
set(ADDON_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/addon.cpp
  ${CMAKE_CURRENT_LIST_DIR}/addon-errors.cpp
  ${CMAKE_CURRENT_LIST_DIR}/addon-convert.cpp
  ${CMAKE_CURRENT_LIST_DIR}/addon-executor.cpp
  ${CMAKE_CURRENT_LIST_DIR}/addon-parallel.cpp
  ${CMAKE_CURRENT_LIST_DIR}/addon-links.cpp
  ${CMAKE_CURRENT_LIST_DIR}/addon-liveness.cpp
  ${CMAKE_CURRENT_LIST_DIR}/addon-process.cpp
)
