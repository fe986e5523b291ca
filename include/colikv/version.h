/* colikv/version.h: the library's version, for C and C++.
 *
 * The one place the version is written: CMake's project(VERSION), and with it
 * colikv.pc and the CMake package's version file, are read from these three
 * lines. colikv_version() (colikv.h) and colikv::version() say which library
 * is linked, which may be newer than the header a program was built with. */
#ifndef COLIKV_VERSION_H
#define COLIKV_VERSION_H

#define COLIKV_VERSION_MAJOR 0
#define COLIKV_VERSION_MINOR 1
#define COLIKV_VERSION_PATCH 0

/* MAJOR * 10000 + MINOR * 100 + PATCH, for comparisons in #if. */
#define COLIKV_VERSION_NUMBER (COLIKV_VERSION_MAJOR * 10000 + COLIKV_VERSION_MINOR * 100 + COLIKV_VERSION_PATCH)

#define COLIKV_VERSION_STRINGIFY_(x) #x
#define COLIKV_VERSION_STRINGIFY(x) COLIKV_VERSION_STRINGIFY_(x)
/* "MAJOR.MINOR.PATCH" */
#define COLIKV_VERSION_STRING                                                    \
  COLIKV_VERSION_STRINGIFY(COLIKV_VERSION_MAJOR) "." COLIKV_VERSION_STRINGIFY( \
      COLIKV_VERSION_MINOR) "." COLIKV_VERSION_STRINGIFY(COLIKV_VERSION_PATCH)

#ifdef __cplusplus
#include "colikv/export.h"

namespace colikv {

constexpr int kVersionMajor = COLIKV_VERSION_MAJOR;
constexpr int kVersionMinor = COLIKV_VERSION_MINOR;
constexpr int kVersionPatch = COLIKV_VERSION_PATCH;
constexpr int kVersionNumber = COLIKV_VERSION_NUMBER;

// The linked library's version, "MAJOR.MINOR.PATCH", and its number
// (MAJOR * 10000 + MINOR * 100 + PATCH). Never fail; the string is static.
COLIKV_API const char* version();
COLIKV_API int version_number();

}  // namespace colikv
#endif

#endif /* COLIKV_VERSION_H */
