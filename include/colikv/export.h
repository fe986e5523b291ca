/* colikv/export.h: which declarations make up the library's ABI.
 *
 * The library is compiled with hidden symbol visibility; COLIKV_API marks the
 * public API (the C functions, the C++ classes and functions of these
 * headers), so a shared libcolikv exports exactly that and nothing of its
 * internals or of the libraries it embeds. On compilers without ELF
 * visibility attributes it expands to nothing. */
#ifndef COLIKV_EXPORT_H
#define COLIKV_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define COLIKV_API __attribute__((visibility("default")))
#define COLIKV_LOCAL __attribute__((visibility("hidden"))) /* internals a public class names */
#else
#define COLIKV_API
#define COLIKV_LOCAL
#endif

#endif /* COLIKV_EXPORT_H */
