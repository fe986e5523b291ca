// The linked library's version (colikv/version.h), for C and C++.
#include "colikv/version.h"

#include "colikv/colikv.h"

namespace colikv {

const char* version() { return COLIKV_VERSION_STRING; }
int version_number() { return COLIKV_VERSION_NUMBER; }

}  // namespace colikv

extern "C" const char* colikv_version(void) { return colikv::version(); }
extern "C" int colikv_version_number(void) { return colikv::version_number(); }
