// The host's byte order, for the formats colikv stores little-endian (token
// ids, hash input): on a little-endian host they are copied as they are.
#ifndef COLIKV_SRC_CORE_BYTE_ORDER_H
#define COLIKV_SRC_CORE_BYTE_ORDER_H

namespace colikv {
namespace detail {

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
constexpr bool kLittleEndian = false;
#else
constexpr bool kLittleEndian = true;
#endif

}  // namespace detail
}  // namespace colikv

#endif  // COLIKV_SRC_CORE_BYTE_ORDER_H
